/* The addon's shared Node-API helpers (napi-util.h). */
#include "napi-util.h"

napi_value addon_throw(napi_env env, const char *code, const char *syscall, int error_number, const char *message) {
  napi_value text, error, value;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &text);
  napi_create_error(env, NULL, text, &error);
  if (code != NULL) {
    napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &value);
    napi_set_named_property(env, error, "code", value);
  }
  if (syscall != NULL) {
    napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &value);
    napi_set_named_property(env, error, "syscall", value);
    napi_create_int32(env, error_number, &value);
    napi_set_named_property(env, error, "errno", value);
  }
  napi_throw(env, error);
  return NULL;
}

napi_value addon_throw_errno(napi_env env, const char *syscall, int error_number) {
  return addon_throw(env, NULL, syscall, error_number, "system call failed");
}

napi_value addon_throw_invalid(napi_env env, const char *message) {
  return addon_throw(env, "ERR_INVALID_ARG", NULL, 0, message);
}

int addon_get_args(napi_env env, napi_callback_info info, size_t expected, size_t optional, napi_value *args) {
  size_t count = expected + optional;
  if (napi_get_cb_info(env, info, &count, args, NULL, NULL) != napi_ok || count < expected) {
    addon_throw_invalid(env, "missing arguments");
    return 0;
  }
  return 1;
}

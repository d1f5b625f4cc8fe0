/*
 * Runs of a session (ort-session.c), on libuv's worker threads: every input, and every output given
 * storage, is an ORT value over the caller's own bytes; an output ORT allocates is handed back as an
 * ArrayBuffer over ORT's memory, released with it.
 */
#include <stdlib.h>
#include <string.h>

#include "ort-runner.h"

/* Bytes per element, by ONNX element type; 0 for strings and types the runner cannot size. */
static const size_t ELEMENT_BYTES[ORT_ELEMENT_TYPE_COUNT] = {0, 4, 1, 1, 2, 2, 4, 8, 0, 1, 2, 8, 4, 8, 8, 16, 2};

typedef struct ort_run {
  ort_session *session;
  napi_async_work work;
  napi_deferred deferred;
  napi_ref arguments; /* the byte views, alive until the run ends */
  napi_ref handle;    /* weak: the handle carries the run for ortTerminate until it ends */
  OrtRunOptions *options;
  size_t input_count, output_count;
  const char **input_names, **output_names;
  OrtValue **inputs, **outputs;
  OrtStatus *status;
} ort_run;

static void free_run(ort_run *run) {
  const OrtApi *api = run->session->runtime->api;
  for (size_t index = 0; run->inputs != NULL && index < run->input_count; index++) api->ReleaseValue(run->inputs[index]);
  for (size_t index = 0; run->outputs != NULL && index < run->output_count; index++) api->ReleaseValue(run->outputs[index]);
  if (run->options != NULL) api->ReleaseRunOptions(run->options);
  if (run->status != NULL) api->ReleaseStatus(run->status);
  free(run->input_names);
  free(run->output_names);
  free(run->inputs);
  free(run->outputs);
  free(run);
}

/* An ORT value over the bytes of a Uint8Array (`bytes` null: none, for ORT to allocate). */
static int tensor_over(napi_env env, ort_run *run, napi_value bytes, napi_value shape, int type, OrtValue **out) {
  const OrtApi *api = run->session->runtime->api;
  void *data = NULL;
  size_t length = 0;
  uint32_t rank = 0;
  napi_get_typedarray_info(env, bytes, NULL, &length, &data, NULL, NULL);
  if (napi_get_array_length(env, shape, &rank) != napi_ok) return ort_throw(env, "a shape is an array"), 0;
  int64_t *dims = calloc(rank + 1, sizeof(int64_t));
  if (dims == NULL) return ort_throw(env, "out of memory"), 0;
  for (uint32_t index = 0; index < rank; index++) {
    napi_value dim;
    napi_get_element(env, shape, index, &dim);
    napi_get_value_int64(env, dim, &dims[index]);
  }
  /* ORT refuses a null pointer even for an empty tensor; nothing is read or written there. */
  char empty = 0;
  int made = ort_ok(env, api, api->CreateTensorWithDataAsOrtValue(run->session->runtime->memory, data == NULL ? &empty : data, length,
                                                               dims, rank, type, out));
  free(dims);
  return made;
}

/* Reads one side of a run: [index...] of the session's values, their bytes and shapes. */
static int read_values(napi_env env, ort_run *run, napi_value indices, napi_value views, napi_value shapes, int inputs) {
  ort_session *session = run->session;
  uint32_t count = 0;
  napi_get_array_length(env, indices, &count);
  const char **names = calloc(count + 1, sizeof(char *));
  OrtValue **values = calloc(count + 1, sizeof(OrtValue *));
  if (inputs) run->input_names = names, run->inputs = values, run->input_count = count;
  else run->output_names = names, run->outputs = values, run->output_count = count;
  if (names == NULL || values == NULL) return ort_throw(env, "out of memory"), 0;
  for (uint32_t index = 0; index < count; index++) {
    napi_value position, view, shape;
    uint32_t value_index = UINT32_MAX;
    bool given = false;
    napi_get_element(env, indices, index, &position);
    napi_get_value_uint32(env, position, &value_index);
    if (value_index >= (inputs ? session->input_count : session->output_count)) return ort_throw(env, "no such value"), 0;
    names[index] = inputs ? session->input_names[value_index] : session->output_names[value_index];
    napi_get_element(env, views, index, &view);
    napi_is_typedarray(env, view, &given);
    if (!given) continue;
    napi_get_element(env, shapes, index, &shape);
    int type = inputs ? session->input_types[value_index] : session->output_types[value_index];
    if (!tensor_over(env, run, view, shape, type, &values[index])) return 0;
  }
  return 1;
}

static void execute_run(napi_env env, void *data) {
  (void)env;
  ort_run *run = data;
  run->status = run->session->runtime->api->Run(run->session->session, run->options, run->input_names,
                                                (const OrtValue *const *)run->inputs, run->input_count,
                                                run->output_names, run->output_count, run->outputs);
}

typedef struct owned_value {
  const OrtApi *api;
  OrtValue *value;
} owned_value;

static void finalize_owned(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  owned_value *owned = hint;
  owned->api->ReleaseValue(owned->value);
  free(owned);
}

/* { data, shape } of an output ORT allocated: an ArrayBuffer over ORT's own memory, no copy. */
static int allocated_output(napi_env env, const OrtApi *api, OrtValue **value, napi_value *out) {
  OrtTensorTypeAndShapeInfo *info = NULL;
  int type = 0;
  size_t rank = 0, count = 0;
  void *data = NULL;
  napi_value result, buffer, shape, dim;
  if (!ort_ok(env, api, api->GetTensorTypeAndShape(*value, &info))) return 0;
  int64_t *dims = NULL;
  int read = ort_ok(env, api, api->GetTensorElementType(info, &type)) && ort_ok(env, api, api->GetDimensionsCount(info, &rank)) &&
             ort_ok(env, api, api->GetTensorShapeElementCount(info, &count)) && (dims = calloc(rank + 1, sizeof(int64_t))) != NULL &&
             ort_ok(env, api, api->GetDimensions(info, dims, rank));
  api->ReleaseTensorTypeAndShapeInfo(info);
  size_t element_bytes = read && type > 0 && type < ORT_ELEMENT_TYPE_COUNT ? ELEMENT_BYTES[type] : 0;
  if (read && element_bytes == 0) {
    ort_throw(env, "the runner cannot return outputs of this type");
    read = 0;
  }
  if (read) read = ort_ok(env, api, api->GetTensorMutableData(*value, &data));
  napi_create_array_with_length(env, rank, &shape);
  for (size_t index = 0; read && index < rank; index++) {
    napi_create_int64(env, dims[index], &dim);
    napi_set_element(env, shape, (uint32_t)index, dim);
  }
  free(dims);
  if (!read) return 0;
  owned_value *owned = count == 0 ? NULL : malloc(sizeof(owned_value));
  if (owned == NULL) {
    /* Empty (or no memory to track it): a plain empty buffer, the value released now. */
    napi_create_arraybuffer(env, 0, NULL, &buffer);
    if (count != 0) return ort_throw(env, "out of memory"), 0;
  } else {
    owned->api = api;
    owned->value = *value;
    /* From this call on the finalizer owns the value (Node-API runs it also when it fails). */
    *value = NULL;
    if (napi_create_external_arraybuffer(env, data, count * element_bytes, finalize_owned, owned, &buffer) != napi_ok) {
      return ort_throw(env, "out of memory"), 0;
    }
  }
  napi_create_object(env, &result);
  napi_set_named_property(env, result, "data", buffer);
  napi_set_named_property(env, result, "shape", shape);
  *out = result;
  return 1;
}

/* One entry per output: null where ORT wrote into the storage given, else what it allocated. */
static int run_results(napi_env env, ort_run *run, napi_value views, napi_value *results) {
  napi_create_array_with_length(env, run->output_count, results);
  for (size_t index = 0; index < run->output_count; index++) {
    napi_value view, entry;
    bool given = false;
    napi_get_element(env, views, (uint32_t)index, &view);
    napi_is_typedarray(env, view, &given);
    if (given) napi_get_null(env, &entry);
    else if (!allocated_output(env, run->session->runtime->api, &run->outputs[index], &entry)) return 0;
    napi_set_element(env, *results, (uint32_t)index, entry);
  }
  return 1;
}

static napi_value pending_error(napi_env env) {
  napi_value error;
  napi_get_and_clear_last_exception(env, &error);
  return error;
}

static void complete_run(napi_env env, napi_status status, void *data) {
  ort_run *run = data;
  const OrtApi *api = run->session->runtime->api;
  napi_value arguments, views, results, handle;
  (void)status;
  if (napi_get_reference_value(env, run->handle, &handle) == napi_ok && handle != NULL) napi_remove_wrap(env, handle, NULL);
  napi_get_reference_value(env, run->arguments, &arguments);
  napi_get_element(env, arguments, 1, &views);
  if (run->status != NULL) {
    ort_throw(env, api->GetErrorMessage(run->status));
    napi_reject_deferred(env, run->deferred, pending_error(env));
  } else if (run_results(env, run, views, &results)) {
    napi_resolve_deferred(env, run->deferred, results);
  } else {
    napi_reject_deferred(env, run->deferred, pending_error(env));
  }
  napi_delete_reference(env, run->arguments);
  napi_delete_reference(env, run->handle);
  napi_delete_async_work(env, run->work);
  ort_session *session = run->session;
  free_run(run);
  session->runs--;
  ort_settle_session(session);
}

/* Everything a run needs, read on the main thread; the caller queues it. */
static ort_run *prepare_run(napi_env env, ort_session *session, napi_value *args) {
  ort_run *run = calloc(1, sizeof(ort_run));
  if (run == NULL) return ort_throw(env, "out of memory"), NULL;
  run->session = session;
  if (!ort_ok(env, session->runtime->api, session->runtime->api->CreateRunOptions(&run->options)) ||
      !read_values(env, run, args[1], args[2], args[3], 1) || !read_values(env, run, args[4], args[5], args[6], 0)) {
    free_run(run);
    return NULL;
  }
  return run;
}

/* The run owns itself: a handle collected mid-run leaves it be (Node-API needs a finalizer here). */
static void forget_handle(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  (void)hint;
}

napi_value ort_start_run(napi_env env, napi_callback_info info) {
  napi_value args[7], arguments, handle, promise, name;
  if (!addon_get_args(env, info, 7, 0, args)) return NULL;
  ort_session *session = ort_unwrapped(env, args[0]);
  if (session == NULL) return NULL;
  if (session->released) return ort_throw(env, "the session was released");
  ort_run *run = prepare_run(env, session, args);
  if (run == NULL) return NULL;
  napi_create_array_with_length(env, 2, &arguments);
  napi_set_element(env, arguments, 0, args[2]);
  napi_set_element(env, arguments, 1, args[5]);
  napi_create_string_utf8(env, "fastify-triton-shm:ort-run", NAPI_AUTO_LENGTH, &name);
  if (napi_create_object(env, &handle) != napi_ok || napi_create_promise(env, &run->deferred, &promise) != napi_ok ||
      napi_create_reference(env, arguments, 1, &run->arguments) != napi_ok) {
    free_run(run);
    return ort_throw(env, "out of memory");
  }
  if (napi_wrap(env, handle, run, forget_handle, NULL, &run->handle) != napi_ok ||
      napi_create_async_work(env, NULL, name, execute_run, complete_run, run, &run->work) != napi_ok ||
      napi_queue_async_work(env, run->work) != napi_ok) {
    /* Only when Node-API itself runs out of memory. */
    if (run->handle != NULL) {
      napi_remove_wrap(env, handle, NULL);
      napi_delete_reference(env, run->handle);
    }
    napi_delete_reference(env, run->arguments);
    free_run(run);
    return ort_throw(env, "out of memory");
  }
  napi_set_named_property(env, handle, "done", promise);
  session->runs++;
  return handle;
}

napi_value ort_terminate_run(napi_env env, napi_callback_info info) {
  napi_value args[1];
  void *data = NULL;
  if (!addon_get_args(env, info, 1, 0, args)) return NULL;
  /* An ended run's handle carries nothing any more: then there is nothing to stop. */
  if (napi_unwrap(env, args[0], &data) == napi_ok && data != NULL) {
    ort_run *run = data;
    const OrtApi *api = run->session->runtime->api;
    ort_ok(env, api, api->RunOptionsSetTerminate(run->options));
  }
  return NULL;
}

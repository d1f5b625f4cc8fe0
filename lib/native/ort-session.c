/*
 * ONNX models run by ONNX Runtime's C API, off the event loop, over the caller's own memory.
 *
 *   ortLoad(libraryPath)                  -> the runtime: the library, opened with dlopen (never linked,
 *                                            so the addon loads without it), with `version` and
 *                                            `apiVersion` (ort-api.h)
 *   ortSession(runtime, model, options)   -> a promise of a session, made on a worker thread from a model
 *                                            file (string) or bytes (Uint8Array, kept alive meanwhile),
 *                                            with `inputs` and `outputs`: { name, tensor, type, shape }
 *   ortRun(session, inputIndices, inputBytes, inputShapes, outputIndices, outputBytes, outputShapes)
 *                                         -> a run, whose `done` promises one entry per output: null where
 *                                            ORT wrote into the Uint8Array given for it, else { data,
 *                                            shape }, an ArrayBuffer over the memory ORT allocated
 *   ortTerminate(run)                     -> asks a run that has not ended to stop
 *   ortRelease(session)                   -> ends the session once its runs have ended
 *
 * This file: the library and its sessions; ort-run.c: the runs.
 *
 * Every input and every output given storage is an ORT value over that very memory: ORT reads the
 * inputs and writes those outputs in place. The run itself happens on a libuv worker thread
 * (Node-API async work); the caller keeps the memory valid until the promise settles.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "ort-runner.h"

napi_value ort_throw(napi_env env, const char *message) {
  return addon_throw(env, "ERR_ORT", NULL, 0, message);
}

int ort_ok(napi_env env, const OrtApi *api, OrtStatus *status) {
  if (status == NULL) return 1;
  ort_throw(env, api->GetErrorMessage(status));
  api->ReleaseStatus(status);
  return 0;
}

void *ort_unwrapped(napi_env env, napi_value value) {
  void *data = NULL;
  if (napi_unwrap(env, value, &data) != napi_ok || data == NULL) ort_throw(env, "expected a handle from this addon");
  return data;
}

static void drop_runtime(ort_runtime *runtime) {
  if (--runtime->references > 0) return;
  /* The library stays loaded: ORT cannot be unloaded safely, and values handed out may outlive this. */
  runtime->api->ReleaseMemoryInfo(runtime->memory);
  runtime->api->ReleaseEnv(runtime->env);
  free(runtime);
}

static void finalize_runtime(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  drop_runtime(data);
}

static void set_string(napi_env env, napi_value object, const char *name, const char *text) {
  napi_value value;
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &value);
  napi_set_named_property(env, object, name, value);
}

/* The API table the runner was written against, from a library that reports a version. */
static const OrtApi *open_api(napi_env env, const char *path, const char **version) {
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) return ort_throw(env, dlerror()), NULL;
  const OrtApiBase *(*get_api_base)(void) = (const OrtApiBase *(*)(void))dlsym(library, "OrtGetApiBase");
  const OrtApiBase *base = get_api_base == NULL ? NULL : get_api_base();
  const OrtApi *api = base == NULL ? NULL : base->GetApi(ORT_RUNNER_API_VERSION);
  if (api == NULL) {
    dlclose(library);
    return ort_throw(env, "the library is not ONNX Runtime, or too old"), NULL;
  }
  *version = base->GetVersionString();
  return api;
}

static napi_value load_runtime(napi_env env, napi_callback_info info) {
  napi_value args[1], handle, api_version;
  char path[4096];
  size_t length = 0;
  const char *version = NULL;
  if (!addon_get_args(env, info, 1, 0, args)) return NULL;
  if (napi_get_value_string_utf8(env, args[0], path, sizeof(path), &length) != napi_ok || length == 0 ||
      length >= sizeof(path) - 1 || strlen(path) != length) {
    return ort_throw(env, "the library path must be a string without NUL bytes, shorter than 4095 bytes");
  }
  const OrtApi *api = open_api(env, path, &version);
  if (api == NULL) return NULL;
  ort_runtime *runtime = calloc(1, sizeof(ort_runtime));
  if (runtime == NULL) return ort_throw(env, "out of memory");
  runtime->api = api;
  if (!ort_ok(env, api, api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "fastify-triton-shm", &runtime->env))) {
    free(runtime);
    return NULL;
  }
  /* The events of this process's sessions and runs; what the library records on making its first
   * environment only ORT_DISABLE_TELEMETRY prevents, which loadRuntime (ort-library.ts) sets first. */
  if (!ort_ok(env, api, api->DisableTelemetryEvents(runtime->env)) ||
      !ort_ok(env, api, api->CreateCpuMemoryInfo(ORT_DEVICE_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, &runtime->memory))) {
    api->ReleaseEnv(runtime->env);
    free(runtime);
    return NULL;
  }
  runtime->references = 1;
  if (napi_create_object(env, &handle) != napi_ok || napi_wrap(env, handle, runtime, finalize_runtime, NULL, NULL) != napi_ok) {
    drop_runtime(runtime);
    return ort_throw(env, "out of memory");
  }
  set_string(env, handle, "version", version);
  napi_create_uint32(env, ORT_RUNNER_API_VERSION, &api_version);
  napi_set_named_property(env, handle, "apiVersion", api_version);
  return handle;
}

static void free_names(char **names, size_t count) {
  if (names == NULL) return;
  for (size_t index = 0; index < count; index++) free(names[index]);
  free(names);
}

static void end_session(ort_session *session) {
  if (session->ended) return;
  session->ended = 1;
  session->runtime->api->ReleaseSession(session->session);
  free_names(session->input_names, session->input_count);
  free_names(session->output_names, session->output_count);
  free(session->input_types);
  free(session->output_types);
  drop_runtime(session->runtime);
}

/* The ORT session ends once released and its last run has completed; the struct, once the handle
 * was collected too (a run, or the handle, may still point at it before). */
void ort_settle_session(ort_session *session) {
  if (session->released && session->runs == 0) end_session(session);
  if (session->collected && session->runs == 0) free(session);
}

static void finalize_session(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  ort_session *session = data;
  session->released = 1;
  session->collected = 1;
  ort_settle_session(session);
}

static int get_int_option(napi_env env, napi_value options, const char *name, int fallback, int *value) {
  bool has = false;
  napi_value property;
  *value = fallback;
  if (napi_has_named_property(env, options, name, &has) != napi_ok || !has) return 1;
  napi_get_named_property(env, options, name, &property);
  if (napi_get_value_int32(env, property, value) != napi_ok) return ort_throw(env, "session options must be integers"), 0;
  return 1;
}

static OrtSessionOptions *session_options(napi_env env, const OrtApi *api, napi_value options) {
  int intra = 0, inter = 0, level = 99, severity = 2;
  OrtSessionOptions *made = NULL;
  if (!get_int_option(env, options, "intraOpThreads", 0, &intra) || !get_int_option(env, options, "interOpThreads", 0, &inter) ||
      !get_int_option(env, options, "graphOptimizationLevel", 99, &level) ||
      !get_int_option(env, options, "logSeverityLevel", 2, &severity) ||
      !ort_ok(env, api, api->CreateSessionOptions(&made))) {
    return NULL;
  }
  if (!ort_ok(env, api, api->SetIntraOpNumThreads(made, intra)) || !ort_ok(env, api, api->SetInterOpNumThreads(made, inter)) ||
      !ort_ok(env, api, api->SetSessionGraphOptimizationLevel(made, level)) ||
      !ort_ok(env, api, api->SetSessionLogSeverityLevel(made, severity))) {
    api->ReleaseSessionOptions(made);
    return NULL;
  }
  return made;
}

/* A session being made on a worker thread: from a file (`path`) or from bytes kept alive by `model`. */
typedef struct ort_load {
  ort_runtime *runtime; /* one reference, handed to the session made */
  OrtSessionOptions *options;
  char *path;
  const void *data;
  size_t length;
  napi_ref model;
  napi_deferred deferred;
  napi_async_work work;
  OrtSession *session;
  OrtStatus *status;
} ort_load;

static void free_load(napi_env env, ort_load *load) {
  const OrtApi *api = load->runtime->api;
  if (load->options != NULL) api->ReleaseSessionOptions(load->options);
  if (load->status != NULL) api->ReleaseStatus(load->status);
  if (load->model != NULL) napi_delete_reference(env, load->model);
  if (load->work != NULL) napi_delete_async_work(env, load->work);
  free(load->path);
  free(load);
}

/* Where the model is: bytes (a Uint8Array, referenced until the load ends) or a path, copied. */
static int read_model(napi_env env, ort_load *load, napi_value model) {
  bool is_typed_array = false;
  size_t length = 0;
  napi_is_typedarray(env, model, &is_typed_array);
  if (is_typed_array) {
    void *data = NULL;
    napi_get_typedarray_info(env, model, NULL, &load->length, &data, NULL, NULL);
    load->data = data;
    return napi_create_reference(env, model, 1, &load->model) == napi_ok || (ort_throw(env, "out of memory"), 0);
  }
  if (napi_get_value_string_utf8(env, model, NULL, 0, &length) != napi_ok) return ort_throw(env, "a model is a path or bytes"), 0;
  load->path = malloc(length + 1);
  if (load->path == NULL) return ort_throw(env, "out of memory"), 0;
  napi_get_value_string_utf8(env, model, load->path, length + 1, &length);
  if (strlen(load->path) != length) return ort_throw(env, "a model path cannot hold a NUL byte"), 0;
  return 1;
}

static void execute_load(napi_env env, void *data) {
  (void)env;
  ort_load *load = data;
  const OrtApi *api = load->runtime->api;
  load->status = load->path != NULL ? api->CreateSession(load->runtime->env, load->path, load->options, &load->session)
                                    : api->CreateSessionFromArray(load->runtime->env, load->data, load->length, load->options, &load->session);
}

static napi_value session_handle(napi_env env, ort_session *session);

/* Settles the load's promise with the session's handle, or with what ORT or Node-API refused. */
static void complete_load(napi_env env, napi_status status, void *data) {
  ort_load *load = data;
  ort_runtime *runtime = load->runtime;
  napi_value handle = NULL, error;
  (void)status;
  if (load->status != NULL) {
    ort_throw(env, runtime->api->GetErrorMessage(load->status));
    drop_runtime(runtime);
  } else {
    ort_session *session = calloc(1, sizeof(ort_session));
    if (session == NULL) {
      runtime->api->ReleaseSession(load->session);
      drop_runtime(runtime);
      ort_throw(env, "out of memory");
    } else {
      session->runtime = runtime;
      session->session = load->session;
      handle = session_handle(env, session);
    }
  }
  if (handle != NULL) {
    napi_resolve_deferred(env, load->deferred, handle);
  } else {
    napi_get_and_clear_last_exception(env, &error);
    napi_reject_deferred(env, load->deferred, error);
  }
  free_load(env, load);
}

/* { name, tensor, type, shape } of one input or output; symbolic dimensions by their name. */
static int describe_value(napi_env env, const OrtApi *api, OrtTypeInfo *info, const char *name, int *type, napi_value *out) {
  const OrtTensorTypeAndShapeInfo *tensor = NULL;
  int onnx_type = 0, element_type = ORT_ELEMENT_UNDEFINED;
  size_t rank = 0;
  napi_value value, shape, dim, flag;
  if (!ort_ok(env, api, api->GetOnnxTypeFromTypeInfo(info, &onnx_type))) return 0;
  napi_create_object(env, &value);
  set_string(env, value, "name", name);
  napi_get_boolean(env, onnx_type == ORT_ONNX_TYPE_TENSOR, &flag);
  napi_set_named_property(env, value, "tensor", flag);
  napi_create_array(env, &shape);
  if (onnx_type == ORT_ONNX_TYPE_TENSOR) {
    if (!ort_ok(env, api, api->CastTypeInfoToTensorInfo(info, &tensor)) || !ort_ok(env, api, api->GetTensorElementType(tensor, &element_type)) ||
        !ort_ok(env, api, api->GetDimensionsCount(tensor, &rank))) {
      return 0;
    }
    int64_t *dims = calloc(rank + 1, sizeof(int64_t));
    const char **symbols = calloc(rank + 1, sizeof(char *));
    int read = dims != NULL && symbols != NULL && ort_ok(env, api, api->GetDimensions(tensor, dims, rank)) &&
               ort_ok(env, api, api->GetSymbolicDimensions(tensor, symbols, rank));
    for (size_t index = 0; read && index < rank; index++) {
      if (dims[index] < 0 && symbols[index] != NULL && symbols[index][0] != '\0') napi_create_string_utf8(env, symbols[index], NAPI_AUTO_LENGTH, &dim);
      else napi_create_int64(env, dims[index], &dim);
      napi_set_element(env, shape, (uint32_t)index, dim);
    }
    free(dims);
    free(symbols);
    if (!read) return 0;
  }
  napi_set_named_property(env, value, "shape", shape);
  napi_create_int32(env, element_type, &dim);
  napi_set_named_property(env, value, "type", dim);
  *type = element_type;
  *out = value;
  return 1;
}

typedef OrtStatus *(*type_info_of)(const OrtSession *, size_t, OrtTypeInfo **);
typedef OrtStatus *(*name_of)(const OrtSession *, size_t, OrtAllocator *, char **);

/* Copies the names of the session's inputs or outputs, and describes each in `list`. */
static int describe_values(napi_env env, ort_session *session, size_t count, type_info_of get_info, name_of get_name,
                           char ***names, int **types, napi_value *list) {
  const OrtApi *api = session->runtime->api;
  OrtAllocator *allocator = NULL;
  if (!ort_ok(env, api, api->GetAllocatorWithDefaultOptions(&allocator))) return 0;
  *names = calloc(count + 1, sizeof(char *));
  *types = calloc(count + 1, sizeof(int));
  if (*names == NULL || *types == NULL) return ort_throw(env, "out of memory"), 0;
  napi_create_array_with_length(env, count, list);
  for (size_t index = 0; index < count; index++) {
    char *name = NULL;
    OrtTypeInfo *info = NULL;
    napi_value value;
    if (!ort_ok(env, api, get_name(session->session, index, allocator, &name))) return 0;
    (*names)[index] = strdup(name);
    api->AllocatorFree(allocator, name);
    if ((*names)[index] == NULL) return ort_throw(env, "out of memory"), 0;
    if (!ort_ok(env, api, get_info(session->session, index, &info))) return 0;
    int described = describe_value(env, api, info, (*names)[index], &(*types)[index], &value);
    api->ReleaseTypeInfo(info);
    if (!described) return 0;
    napi_set_element(env, *list, (uint32_t)index, value);
  }
  return 1;
}

static napi_value session_handle(napi_env env, ort_session *session) {
  const OrtApi *api = session->runtime->api;
  napi_value handle, inputs, outputs;
  if (!ort_ok(env, api, api->SessionGetInputCount(session->session, &session->input_count)) ||
      !ort_ok(env, api, api->SessionGetOutputCount(session->session, &session->output_count)) ||
      !describe_values(env, session, session->input_count, api->SessionGetInputTypeInfo, api->SessionGetInputName,
                       &session->input_names, &session->input_types, &inputs) ||
      !describe_values(env, session, session->output_count, api->SessionGetOutputTypeInfo, api->SessionGetOutputName,
                       &session->output_names, &session->output_types, &outputs)) {
    end_session(session);
    free(session);
    return NULL;
  }
  if (napi_create_object(env, &handle) != napi_ok || napi_wrap(env, handle, session, finalize_session, NULL, NULL) != napi_ok) {
    end_session(session);
    free(session);
    return ort_throw(env, "out of memory");
  }
  napi_set_named_property(env, handle, "inputs", inputs);
  napi_set_named_property(env, handle, "outputs", outputs);
  return handle;
}

static napi_value new_session(napi_env env, napi_callback_info info) {
  napi_value args[3], promise, name;
  if (!addon_get_args(env, info, 3, 0, args)) return NULL;
  ort_runtime *runtime = ort_unwrapped(env, args[0]);
  if (runtime == NULL) return NULL;
  ort_load *load = calloc(1, sizeof(ort_load));
  if (load == NULL) return ort_throw(env, "out of memory");
  load->runtime = runtime;
  runtime->references++;
  load->options = session_options(env, runtime->api, args[2]);
  napi_create_string_utf8(env, "fastify-triton-shm:ort-load", NAPI_AUTO_LENGTH, &name);
  if (load->options == NULL || !read_model(env, load, args[1])) {
    /* A refused option or model has thrown already. */
    drop_runtime(runtime);
    free_load(env, load);
    return NULL;
  }
  if (napi_create_promise(env, &load->deferred, &promise) != napi_ok ||
      napi_create_async_work(env, NULL, name, execute_load, complete_load, load, &load->work) != napi_ok ||
      napi_queue_async_work(env, load->work) != napi_ok) {
    /* Only when Node-API itself runs out of memory. */
    drop_runtime(runtime);
    free_load(env, load);
    return ort_throw(env, "could not start loading the model");
  }
  return promise;
}

static napi_value release(napi_env env, napi_callback_info info) {
  napi_value args[1];
  if (!addon_get_args(env, info, 1, 0, args)) return NULL;
  ort_session *session = ort_unwrapped(env, args[0]);
  if (session == NULL) return NULL;
  session->released = 1;
  ort_settle_session(session);
  return NULL;
}

void ort_runner_init(napi_env env, napi_value exports) {
  napi_property_descriptor functions[] = {
      {"ortLoad", NULL, load_runtime, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortSession", NULL, new_session, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortRun", NULL, ort_start_run, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortTerminate", NULL, ort_terminate_run, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortRelease", NULL, release, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions);
}

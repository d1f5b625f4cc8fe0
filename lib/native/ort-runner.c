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
 * Every input and every output given storage is an ORT value over that very memory: ORT reads the
 * inputs and writes those outputs in place. The run itself happens on a libuv worker thread
 * (Node-API async work); the caller keeps the memory valid until the promise settles.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "ort-api.h"
#include "ort-runner.h"

/* Bytes per element, by ONNX element type; 0 for strings and types the runner cannot size. */
static const size_t ELEMENT_BYTES[ORT_ELEMENT_TYPE_COUNT] = {0, 4, 1, 1, 2, 2, 4, 8, 0, 1, 2, 8, 4, 8, 8, 16, 2};

typedef struct ort_runtime {
  const OrtApi *api;
  OrtEnv *env;
  OrtMemoryInfo *memory; /* CPU memory: where every value the runner makes lies */
  int references;        /* the runtime's handle and every session; the last one frees */
} ort_runtime;

typedef struct ort_session {
  ort_runtime *runtime;
  OrtSession *session;
  size_t input_count, output_count;
  char **input_names, **output_names;
  int *input_types, *output_types; /* ONNX element types */
  int runs;       /* runs not yet completed */
  int released;   /* ortRelease was called, or the handle was collected: no more runs */
  int ended;      /* the ORT session is released */
  int collected;  /* the handle's finalizer ran; the struct goes with the last run */
} ort_session;

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

static napi_value throw_message(napi_env env, const char *message) {
  napi_value text, error, code;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &text);
  napi_create_error(env, NULL, text, &error);
  napi_create_string_utf8(env, "ERR_ORT", NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_throw(env, error);
  return NULL;
}

/* Throws ORT's message for a failed call; returns whether the call succeeded. */
static int ok(napi_env env, const OrtApi *api, OrtStatus *status) {
  if (status == NULL) return 1;
  throw_message(env, api->GetErrorMessage(status));
  api->ReleaseStatus(status);
  return 0;
}

static int get_args(napi_env env, napi_callback_info info, size_t expected, napi_value *args) {
  size_t count = expected;
  if (napi_get_cb_info(env, info, &count, args, NULL, NULL) != napi_ok || count < expected) {
    throw_message(env, "missing arguments");
    return 0;
  }
  return 1;
}

static void *unwrapped(napi_env env, napi_value value) {
  void *data = NULL;
  if (napi_unwrap(env, value, &data) != napi_ok || data == NULL) throw_message(env, "expected a handle from this addon");
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
  if (library == NULL) return throw_message(env, dlerror()), NULL;
  const OrtApiBase *(*get_api_base)(void) = (const OrtApiBase *(*)(void))dlsym(library, "OrtGetApiBase");
  const OrtApiBase *base = get_api_base == NULL ? NULL : get_api_base();
  const OrtApi *api = base == NULL ? NULL : base->GetApi(ORT_RUNNER_API_VERSION);
  if (api == NULL) {
    dlclose(library);
    return throw_message(env, "the library is not ONNX Runtime, or too old"), NULL;
  }
  *version = base->GetVersionString();
  return api;
}

static napi_value load_runtime(napi_env env, napi_callback_info info) {
  napi_value args[1], handle, api_version;
  char path[4096];
  size_t length = 0;
  const char *version = NULL;
  if (!get_args(env, info, 1, args)) return NULL;
  if (napi_get_value_string_utf8(env, args[0], path, sizeof(path), &length) != napi_ok || length == 0 ||
      length >= sizeof(path) - 1 || strlen(path) != length) {
    return throw_message(env, "the library path must be a string without NUL bytes, shorter than 4095 bytes");
  }
  const OrtApi *api = open_api(env, path, &version);
  if (api == NULL) return NULL;
  ort_runtime *runtime = calloc(1, sizeof(ort_runtime));
  if (runtime == NULL) return throw_message(env, "out of memory");
  runtime->api = api;
  if (!ok(env, api, api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "fastify-triton-shm", &runtime->env))) {
    free(runtime);
    return NULL;
  }
  if (!ok(env, api, api->CreateCpuMemoryInfo(ORT_DEVICE_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, &runtime->memory))) {
    api->ReleaseEnv(runtime->env);
    free(runtime);
    return NULL;
  }
  runtime->references = 1;
  if (napi_create_object(env, &handle) != napi_ok || napi_wrap(env, handle, runtime, finalize_runtime, NULL, NULL) != napi_ok) {
    drop_runtime(runtime);
    return throw_message(env, "out of memory");
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
static void settle_session(ort_session *session) {
  if (session->released && session->runs == 0) end_session(session);
  if (session->collected && session->runs == 0) free(session);
}

static void finalize_session(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  ort_session *session = data;
  session->released = 1;
  session->collected = 1;
  settle_session(session);
}

static int get_int_option(napi_env env, napi_value options, const char *name, int fallback, int *value) {
  bool has = false;
  napi_value property;
  *value = fallback;
  if (napi_has_named_property(env, options, name, &has) != napi_ok || !has) return 1;
  napi_get_named_property(env, options, name, &property);
  if (napi_get_value_int32(env, property, value) != napi_ok) return throw_message(env, "session options must be integers"), 0;
  return 1;
}

static OrtSessionOptions *session_options(napi_env env, const OrtApi *api, napi_value options) {
  int intra = 0, inter = 0, level = 99, severity = 2;
  OrtSessionOptions *made = NULL;
  if (!get_int_option(env, options, "intraOpThreads", 0, &intra) || !get_int_option(env, options, "interOpThreads", 0, &inter) ||
      !get_int_option(env, options, "graphOptimizationLevel", 99, &level) ||
      !get_int_option(env, options, "logSeverityLevel", 2, &severity) ||
      !ok(env, api, api->CreateSessionOptions(&made))) {
    return NULL;
  }
  if (!ok(env, api, api->SetIntraOpNumThreads(made, intra)) || !ok(env, api, api->SetInterOpNumThreads(made, inter)) ||
      !ok(env, api, api->SetSessionGraphOptimizationLevel(made, level)) ||
      !ok(env, api, api->SetSessionLogSeverityLevel(made, severity))) {
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
    return napi_create_reference(env, model, 1, &load->model) == napi_ok || (throw_message(env, "out of memory"), 0);
  }
  if (napi_get_value_string_utf8(env, model, NULL, 0, &length) != napi_ok) return throw_message(env, "a model is a path or bytes"), 0;
  load->path = malloc(length + 1);
  if (load->path == NULL) return throw_message(env, "out of memory"), 0;
  napi_get_value_string_utf8(env, model, load->path, length + 1, &length);
  if (strlen(load->path) != length) return throw_message(env, "a model path cannot hold a NUL byte"), 0;
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
    throw_message(env, runtime->api->GetErrorMessage(load->status));
    drop_runtime(runtime);
  } else {
    ort_session *session = calloc(1, sizeof(ort_session));
    if (session == NULL) {
      runtime->api->ReleaseSession(load->session);
      drop_runtime(runtime);
      throw_message(env, "out of memory");
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
  if (!ok(env, api, api->GetOnnxTypeFromTypeInfo(info, &onnx_type))) return 0;
  napi_create_object(env, &value);
  set_string(env, value, "name", name);
  napi_get_boolean(env, onnx_type == ORT_ONNX_TYPE_TENSOR, &flag);
  napi_set_named_property(env, value, "tensor", flag);
  napi_create_array(env, &shape);
  if (onnx_type == ORT_ONNX_TYPE_TENSOR) {
    if (!ok(env, api, api->CastTypeInfoToTensorInfo(info, &tensor)) || !ok(env, api, api->GetTensorElementType(tensor, &element_type)) ||
        !ok(env, api, api->GetDimensionsCount(tensor, &rank))) {
      return 0;
    }
    int64_t *dims = calloc(rank + 1, sizeof(int64_t));
    const char **symbols = calloc(rank + 1, sizeof(char *));
    int read = dims != NULL && symbols != NULL && ok(env, api, api->GetDimensions(tensor, dims, rank)) &&
               ok(env, api, api->GetSymbolicDimensions(tensor, symbols, rank));
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
  if (!ok(env, api, api->GetAllocatorWithDefaultOptions(&allocator))) return 0;
  *names = calloc(count + 1, sizeof(char *));
  *types = calloc(count + 1, sizeof(int));
  if (*names == NULL || *types == NULL) return throw_message(env, "out of memory"), 0;
  napi_create_array_with_length(env, count, list);
  for (size_t index = 0; index < count; index++) {
    char *name = NULL;
    OrtTypeInfo *info = NULL;
    napi_value value;
    if (!ok(env, api, get_name(session->session, index, allocator, &name))) return 0;
    (*names)[index] = strdup(name);
    api->AllocatorFree(allocator, name);
    if ((*names)[index] == NULL) return throw_message(env, "out of memory"), 0;
    if (!ok(env, api, get_info(session->session, index, &info))) return 0;
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
  if (!ok(env, api, api->SessionGetInputCount(session->session, &session->input_count)) ||
      !ok(env, api, api->SessionGetOutputCount(session->session, &session->output_count)) ||
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
    return throw_message(env, "out of memory");
  }
  napi_set_named_property(env, handle, "inputs", inputs);
  napi_set_named_property(env, handle, "outputs", outputs);
  return handle;
}

static napi_value new_session(napi_env env, napi_callback_info info) {
  napi_value args[3], promise, name;
  if (!get_args(env, info, 3, args)) return NULL;
  ort_runtime *runtime = unwrapped(env, args[0]);
  if (runtime == NULL) return NULL;
  ort_load *load = calloc(1, sizeof(ort_load));
  if (load == NULL) return throw_message(env, "out of memory");
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
    return throw_message(env, "could not start loading the model");
  }
  return promise;
}

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
  if (napi_get_array_length(env, shape, &rank) != napi_ok) return throw_message(env, "a shape is an array"), 0;
  int64_t *dims = calloc(rank + 1, sizeof(int64_t));
  if (dims == NULL) return throw_message(env, "out of memory"), 0;
  for (uint32_t index = 0; index < rank; index++) {
    napi_value dim;
    napi_get_element(env, shape, index, &dim);
    napi_get_value_int64(env, dim, &dims[index]);
  }
  /* ORT refuses a null pointer even for an empty tensor; nothing is read or written there. */
  char empty = 0;
  int made = ok(env, api, api->CreateTensorWithDataAsOrtValue(run->session->runtime->memory, data == NULL ? &empty : data, length,
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
  if (names == NULL || values == NULL) return throw_message(env, "out of memory"), 0;
  for (uint32_t index = 0; index < count; index++) {
    napi_value position, view, shape;
    uint32_t value_index = UINT32_MAX;
    bool given = false;
    napi_get_element(env, indices, index, &position);
    napi_get_value_uint32(env, position, &value_index);
    if (value_index >= (inputs ? session->input_count : session->output_count)) return throw_message(env, "no such value"), 0;
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
  if (!ok(env, api, api->GetTensorTypeAndShape(*value, &info))) return 0;
  int64_t *dims = NULL;
  int read = ok(env, api, api->GetTensorElementType(info, &type)) && ok(env, api, api->GetDimensionsCount(info, &rank)) &&
             ok(env, api, api->GetTensorShapeElementCount(info, &count)) && (dims = calloc(rank + 1, sizeof(int64_t))) != NULL &&
             ok(env, api, api->GetDimensions(info, dims, rank));
  api->ReleaseTensorTypeAndShapeInfo(info);
  size_t element_bytes = read && type > 0 && type < ORT_ELEMENT_TYPE_COUNT ? ELEMENT_BYTES[type] : 0;
  if (read && element_bytes == 0) {
    throw_message(env, "the runner cannot return outputs of this type");
    read = 0;
  }
  if (read) read = ok(env, api, api->GetTensorMutableData(*value, &data));
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
    if (count != 0) return throw_message(env, "out of memory"), 0;
  } else {
    owned->api = api;
    owned->value = *value;
    /* From this call on the finalizer owns the value (Node-API runs it also when it fails). */
    *value = NULL;
    if (napi_create_external_arraybuffer(env, data, count * element_bytes, finalize_owned, owned, &buffer) != napi_ok) {
      return throw_message(env, "out of memory"), 0;
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
    throw_message(env, api->GetErrorMessage(run->status));
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
  settle_session(session);
}

/* Everything a run needs, read on the main thread; the caller queues it. */
static ort_run *prepare_run(napi_env env, ort_session *session, napi_value *args) {
  ort_run *run = calloc(1, sizeof(ort_run));
  if (run == NULL) return throw_message(env, "out of memory"), NULL;
  run->session = session;
  if (!ok(env, session->runtime->api, session->runtime->api->CreateRunOptions(&run->options)) ||
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

static napi_value start_run(napi_env env, napi_callback_info info) {
  napi_value args[7], arguments, handle, promise, name;
  if (!get_args(env, info, 7, args)) return NULL;
  ort_session *session = unwrapped(env, args[0]);
  if (session == NULL) return NULL;
  if (session->released) return throw_message(env, "the session was released");
  ort_run *run = prepare_run(env, session, args);
  if (run == NULL) return NULL;
  napi_create_array_with_length(env, 2, &arguments);
  napi_set_element(env, arguments, 0, args[2]);
  napi_set_element(env, arguments, 1, args[5]);
  napi_create_string_utf8(env, "fastify-triton-shm:ort-run", NAPI_AUTO_LENGTH, &name);
  if (napi_create_object(env, &handle) != napi_ok || napi_create_promise(env, &run->deferred, &promise) != napi_ok ||
      napi_create_reference(env, arguments, 1, &run->arguments) != napi_ok) {
    free_run(run);
    return throw_message(env, "out of memory");
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
    return throw_message(env, "out of memory");
  }
  napi_set_named_property(env, handle, "done", promise);
  session->runs++;
  return handle;
}

static napi_value terminate_run(napi_env env, napi_callback_info info) {
  napi_value args[1];
  void *data = NULL;
  if (!get_args(env, info, 1, args)) return NULL;
  /* An ended run's handle carries nothing any more: then there is nothing to stop. */
  if (napi_unwrap(env, args[0], &data) == napi_ok && data != NULL) {
    ort_run *run = data;
    const OrtApi *api = run->session->runtime->api;
    ok(env, api, api->RunOptionsSetTerminate(run->options));
  }
  return NULL;
}

static napi_value release(napi_env env, napi_callback_info info) {
  napi_value args[1];
  if (!get_args(env, info, 1, args)) return NULL;
  ort_session *session = unwrapped(env, args[0]);
  if (session == NULL) return NULL;
  session->released = 1;
  settle_session(session);
  return NULL;
}

void ort_runner_init(napi_env env, napi_value exports) {
  napi_property_descriptor functions[] = {
      {"ortLoad", NULL, load_runtime, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortSession", NULL, new_session, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortRun", NULL, start_run, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortTerminate", NULL, terminate_run, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ortRelease", NULL, release, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions);
}

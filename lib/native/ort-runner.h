/*
 * ONNX models run by ONNX Runtime's C API (ort-session.c: the library and its sessions; ort-run.c:
 * runs), defined on the addon's exports by ort_runner_init.
 */
#ifndef FASTIFY_TRITON_SHM_ORT_RUNNER_H
#define FASTIFY_TRITON_SHM_ORT_RUNNER_H

#include "napi-util.h"

#include "ort-api.h"

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

/* Throws an Error (code ERR_ORT) with `message`; returns NULL. */
napi_value ort_throw(napi_env env, const char *message);
/* Throws ORT's message for a failed call; returns whether the call succeeded. */
int ort_ok(napi_env env, const OrtApi *api, OrtStatus *status);
/* The struct a handle of this addon wraps; throws and returns NULL for anything else. */
void *ort_unwrapped(napi_env env, napi_value value);
/* Ends the ORT session once released and without runs; frees the struct once collected too. */
void ort_settle_session(ort_session *session);

napi_value ort_start_run(napi_env env, napi_callback_info info);
napi_value ort_terminate_run(napi_env env, napi_callback_info info);

void ort_runner_init(napi_env env, napi_value exports);

#endif

/* ONNX models run by ONNX Runtime (ort-runner.c), defined on the addon's exports. */
#ifndef FASTIFY_TRITON_SHM_ORT_RUNNER_H
#define FASTIFY_TRITON_SHM_ORT_RUNNER_H

#define NAPI_VERSION 8
#include <node_api.h>

void ort_runner_init(napi_env env, napi_value exports);

#endif

/*
 * The addon's entry: each part defines its functions on the exports.
 *
 *   shm.c (with handles.c, fault-guard.c)  POSIX shared memory: map, window, unmap, create, unlink...
 *   peer.c                                 who a client is: tcpPeer, unixPeer, userGroups
 *   ort-session.c, ort-run.c               the ONNX runner: ortLoad, ortSession, ortRun...
 */
#include "napi-util.h"
#include "ort-runner.h"
#include "peer.h"
#include "shm.h"

static napi_value init(napi_env env, napi_value exports) {
  if (!shm_init(env, exports)) return NULL;
  peer_init(env, exports);
  ort_runner_init(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

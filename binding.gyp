{
  "targets": [
    {
      "target_name": "shm",
      "sources": ["lib/native/addon.c", "lib/native/napi-util.c", "lib/native/shm.c", "lib/native/fault-guard.c", "lib/native/handles.c", "lib/native/peer.c", "lib/native/ort-session.c", "lib/native/ort-run.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"],
      "libraries": ["-lrt", "-ldl"]
    }
  ]
}

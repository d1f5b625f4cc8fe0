{
  "targets": [
    {
      "target_name": "shm",
      "sources": ["lib/native/shm.c", "lib/native/fault-guard.c", "lib/native/handles.c", "lib/native/ort-session.c", "lib/native/ort-run.c", "lib/native/peer.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"],
      "libraries": ["-lrt", "-ldl"]
    }
  ]
}

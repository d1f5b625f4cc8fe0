{
  "targets": [
    {
      "target_name": "shm",
      "sources": ["lib/native/shm.c", "lib/native/fault-guard.c", "lib/native/ort-runner.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"],
      "libraries": ["-lrt", "-ldl"]
    }
  ]
}

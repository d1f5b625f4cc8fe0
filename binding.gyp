{
  "targets": [
    {
      "target_name": "shm",
      "sources": ["lib/native/shm.c"],
      "cflags": ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"],
      "libraries": ["-lrt"]
    }
  ]
}

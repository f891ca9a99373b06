{
  # sluice's N-API addon: mkfifo and Linux pipe sizes for Pipe mode, and FUSE mounts
  # served from an open /dev/fuse descriptor (src/fuse_fd.c; libfuse.so.2 opened in
  # src/libfuse.c), and the paced FIFO writer
  # thread of Pipe mode (src/pipe_writer.c), and FUSE reads answered from memory in
  # libfuse's worker thread (src/fuse_memread.c, its mounts in src/fuse_mounts.c, getattrs in
  # src/fuse_attrs.c, opens and
  # passthrough in src/fuse_open.c, their JavaScript face in src/fuse_memread_napi.c), with
  # small files of the disk tier read and checked there too (src/tier_small.c), and a
  # sequential reader's reads answered from block cache buffers it lends (src/fuse_lend.c).
  # Built by `node-gyp rebuild` in this folder; output stays in native/build/.
  "targets": [
    {
      "target_name": "sluice_native",
      "sources": ["binding.c", "src/fifo.c", "src/libfuse.c", "src/fuse_fd.c", "src/fuse_init.c", "src/pipe_writer.c", "src/fuse_mounts.c", "src/fuse_memread.c", "src/fuse_attrs.c", "src/fuse_open.c", "src/fuse_memread_napi.c", "src/fuse_lend.c", "src/tier_small.c"],
      # dlopen/dlvsym: in libc since glibc 2.34, in libdl before.
      "libraries": ["-ldl", "-lpthread"],
      "include_dirs": ["include"],
      # N-API 8 is in every Node >= 12.22, far below our Node >= 20 floor.
      "defines": ["NAPI_VERSION=8"],
      "cflags_c": ["-std=gnu11", "-Wall", "-Wextra", "-O2"]
    }
  ]
}

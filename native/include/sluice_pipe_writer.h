/*
 * sluice_pipe_writer: the paced FIFO writer thread of Pipe mode (src/pipe_writer.c).
 * Registers pipeWriterOpen/Push/End/Cancel/Stats on the addon's exports.
 */
#ifndef SLUICE_PIPE_WRITER_H
#define SLUICE_PIPE_WRITER_H

#include <node_api.h>

napi_status sluice_pipe_writer_init(napi_env env, napi_value exports);

#endif

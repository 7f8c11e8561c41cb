/* tcpbytes.h - bytes a TCP socket's peer has acknowledged. */
#ifndef FAULTNET_TCPBYTES_H
#define FAULTNET_TCPBYTES_H

#include <stdint.h>

/* 0 when the kernel cannot say. */
uint64_t fn_tcp_bytes_acked(int fd);

#endif

/*
 * The part of the kernel's netlink and sock_diag interface peer.c uses, declared here as
 * linux/netlink.h, linux/sock_diag.h and linux/inet_diag.h declare it: the musl toolchain the musl
 * prebuild is made with ships no kernel headers. These are the kernel's user-space ABI (layouts
 * and numbers never change; new fields go at the ends of answers, which are read by their length).
 */
#ifndef FASTIFY_TRITON_SHM_SOCK_DIAG_H
#define FASTIFY_TRITON_SHM_SOCK_DIAG_H

#include <stdint.h>
#include <sys/socket.h>

#define NETLINK_SOCK_DIAG 4     /* socket(AF_NETLINK, ..., NETLINK_SOCK_DIAG) */
#define SOCK_DIAG_BY_FAMILY 20  /* the request: sockets of one family and protocol */
#define NLMSG_ERROR 2           /* an answer that is an error: struct nlmsgerr */
#define NLM_F_REQUEST 1
#define INET_DIAG_NOCOOKIE (~0u) /* no socket cookie to match */

struct nlmsghdr {
  uint32_t nlmsg_len; /* of the whole message, this header included */
  uint16_t nlmsg_type;
  uint16_t nlmsg_flags;
  uint32_t nlmsg_seq;
  uint32_t nlmsg_pid;
};

/* A message's payload starts right after its header (16 bytes: already 4-byte aligned). */
#define NLMSG_HDRLEN ((uint32_t)sizeof(struct nlmsghdr))
#define NLMSG_DATA(header) ((const void *)((const char *)(header) + NLMSG_HDRLEN))

struct nlmsgerr {
  int error; /* a negative errno value */
  struct nlmsghdr msg;
};

struct sockaddr_nl {
  sa_family_t nl_family; /* AF_NETLINK */
  unsigned short nl_pad;
  uint32_t nl_pid; /* 0: the kernel */
  uint32_t nl_groups;
};

/* A socket by its ends: ports and addresses in network byte order; an IPv4 address in [0]. */
struct inet_diag_sockid {
  uint16_t idiag_sport;
  uint16_t idiag_dport;
  uint32_t idiag_src[4];
  uint32_t idiag_dst[4];
  uint32_t idiag_if;
  uint32_t idiag_cookie[2];
};

struct inet_diag_req_v2 {
  uint8_t sdiag_family;
  uint8_t sdiag_protocol;
  uint8_t idiag_ext;
  uint8_t pad;
  uint32_t idiag_states; /* a bit per TCP state */
  struct inet_diag_sockid id;
};

struct inet_diag_msg {
  uint8_t idiag_family;
  uint8_t idiag_state;
  uint8_t idiag_timer;
  uint8_t idiag_retrans;
  struct inet_diag_sockid id;
  uint32_t idiag_expires;
  uint32_t idiag_rqueue;
  uint32_t idiag_wqueue;
  uint32_t idiag_uid;
  uint32_t idiag_inode;
};

_Static_assert(sizeof(struct nlmsghdr) == 16, "struct nlmsghdr is the kernel's");
_Static_assert(sizeof(struct sockaddr_nl) == 12, "struct sockaddr_nl is the kernel's");
_Static_assert(sizeof(struct inet_diag_req_v2) == 56, "struct inet_diag_req_v2 is the kernel's");
_Static_assert(sizeof(struct inet_diag_msg) == 72, "struct inet_diag_msg is the kernel's");

#endif

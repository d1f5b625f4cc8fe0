/*
 * Who a client is, asked of the kernel (peer.c): the user behind the client's end of a TCP
 * connection (NETLINK_SOCK_DIAG) or of a Unix domain socket (SO_PEERCRED), that user's groups,
 * and the rule map() applies when given a peer: could that user open the object read-write?
 */
#ifndef FASTIFY_TRITON_SHM_PEER_H
#define FASTIFY_TRITON_SHM_PEER_H

#include "napi-util.h"

#include <stdint.h>
#include <sys/stat.h>

/* map()'s optional 4th argument, `{ uid, gids }`. */
typedef struct peer_identity {
  int given; /* 0: no peer was given; the server maps as itself alone */
  uint32_t uid;
  uint32_t *gids; /* gid_count of them (malloc'd; NULL when none): peer_identity_free */
  uint32_t gid_count;
} peer_identity;

/* Defines tcpPeer, unixPeer and userGroups on the addon's exports. */
void peer_init(napi_env env, napi_value exports);

/* Reads `{ uid, gids }`, or notes that none was given (undefined). Returns 0 with an
 * ERR_INVALID_ARG error thrown for anything else; nothing is left to free then. */
int peer_identity_get(napi_env env, napi_value value, peer_identity *peer);
void peer_identity_free(peer_identity *peer);

/* Whether the peer could open the object read-write, as access(2) decides for that user from the
 * object's owner, group and mode. */
int peer_may_open_read_write(const peer_identity *peer, const struct stat *object);

#endif

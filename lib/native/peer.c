/*
 * Who a client is, asked of the kernel, never of the request:
 *
 *   tcpPeer(localAddress, localPort, remoteAddress, remotePort)
 *                    -> { uid, inode } of the client's socket of a connection this server accepted
 *                       (the four values are the server's own view of it), or undefined when this
 *                       host, in this network namespace, holds no such socket held by a process
 *   unixPeer(fd)     -> { uid, gid, pid } of the process that connected a Unix domain socket, or
 *                       undefined for a socket with no peer
 *   userGroups(uid)  -> the gids of the user's groups, primary included; [] for an unknown uid
 *
 * and peer_may_open_read_write, the rule map() applies when it is given a peer.
 *
 * Errors are thrown in the addon's one shape (napi-util.h): `syscall` and `errno`, or a `code`.
 */
#include "peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock-diag.h"

/* Largest uid or gid: (uid_t)-1 means "none" to the kernel, never a user. */
#define ID_MAX 4294967294.0
/* Longest address text inet_pton takes (INET6_ADDRSTRLEN counts the NUL). */
#define ADDRESS_MAX (INET6_ADDRSTRLEN - 1)
/* As shm.c's get_text: room past the limit, so that a string cut short is always seen as too long. */
#define TEXT_SLACK 6
/* The kernel gives a process at most NGROUPS_MAX supplementary groups, and one primary group. */
#define GROUPS_MAX (NGROUPS_MAX + 1)
/* The largest user database entry read (getpwuid_r's buffer grows up to it). */
#define PASSWD_BUFFER_MAX (1 << 20)

/* Throws ERR_INVALID_ARG with `message`; returns 0, for the readers of arguments below. */
static int refuse(napi_env env, const char *message) {
  addon_throw_invalid(env, message);
  return 0;
}

/* A JavaScript number that is an integer in [low, high]. */
static int get_integer(napi_env env, napi_value value, double low, double high, double *number) {
  napi_valuetype type = napi_undefined;
  napi_typeof(env, value, &type);
  if (type != napi_number || napi_get_value_double(env, value, number) != napi_ok) return 0;
  return *number >= low && *number <= high && floor(*number) == *number;
}

static int get_id(napi_env env, napi_value value, uint32_t *id) {
  double number;
  if (!get_integer(env, value, 0, ID_MAX, &number)) return refuse(env, "uids and gids must be integers from 0 to 4294967294");
  *id = (uint32_t)number;
  return 1;
}

/* ---- One end of a TCP connection ---- */

typedef struct endpoint {
  int family; /* AF_INET or AF_INET6 */
  uint8_t address[16];
  uint16_t port;
} endpoint;

static int address_length(int family) {
  return family == AF_INET ? 4 : 16;
}

/* An address as Node prints one. An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, what a
 * dual-stack listener reports) is read as the IPv4 address it maps: the client's socket then is an
 * IPv4 one, and the kernel keeps it by its IPv4 addresses. */
static int get_address(napi_env env, napi_value value, endpoint *end) {
  char text[ADDRESS_MAX + TEXT_SLACK];
  size_t copied = 0;
  struct in6_addr ipv6;
  if (napi_get_value_string_utf8(env, value, text, sizeof text, &copied) != napi_ok) {
    return refuse(env, "addresses must be strings");
  }
  /* A longer string, or one with a NUL byte, could be cut to a valid address it is not. */
  if (copied <= ADDRESS_MAX && strlen(text) == copied) {
    if (inet_pton(AF_INET, text, end->address) == 1) {
      end->family = AF_INET;
      return 1;
    }
    if (inet_pton(AF_INET6, text, &ipv6) == 1) {
      int mapped = IN6_IS_ADDR_V4MAPPED(&ipv6);
      end->family = mapped ? AF_INET : AF_INET6;
      memcpy(end->address, ipv6.s6_addr + (mapped ? 12 : 0), (size_t)address_length(end->family));
      return 1;
    }
  }
  return refuse(env, "addresses must be IPv4 or IPv6 addresses");
}

static int get_port(napi_env env, napi_value value, endpoint *end) {
  double number;
  /* Port 0 names no connected socket. */
  if (!get_integer(env, value, 1, 65535, &number)) return refuse(env, "ports must be integers from 1 to 65535");
  end->port = (uint16_t)number;
  return 1;
}

/* ---- The kernel's answer for one socket (NETLINK_SOCK_DIAG) ---- */

/* The only request on its socket: any number would do, the answer must carry it back. */
#define SEQUENCE 1

typedef struct diag_request {
  struct nlmsghdr header;
  struct inet_diag_req_v2 body;
} diag_request;

/* The client's socket of the connection the server sees from `local` to `remote`: its own source
 * is the server's remote end, its destination the server's local end. */
static void client_socket_request(const endpoint *local, const endpoint *remote, diag_request *request) {
  memset(request, 0, sizeof *request);
  request->header.nlmsg_len = sizeof *request;
  request->header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  /* No NLM_F_DUMP: the kernel looks up exactly this 4-tuple (a hash lookup, whatever the number of
   * sockets) and answers with that one socket or ENOENT. */
  request->header.nlmsg_flags = NLM_F_REQUEST;
  request->header.nlmsg_seq = SEQUENCE;
  request->body.sdiag_family = (uint8_t)local->family;
  request->body.sdiag_protocol = IPPROTO_TCP;
  request->body.idiag_states = ~0u;
  request->body.id.idiag_sport = htons(remote->port);
  request->body.id.idiag_dport = htons(local->port);
  memcpy(request->body.id.idiag_src, remote->address, (size_t)address_length(remote->family));
  memcpy(request->body.id.idiag_dst, local->address, (size_t)address_length(local->family));
  request->body.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  request->body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
}

/* One address of the answer, in the family asked: an IPv6 socket connected to an IPv4 peer is
 * found by its IPv4 addresses but answers with their IPv4-mapped form. NULL if it has none. */
static const void *answered_address(const struct inet_diag_msg *answer, const uint32_t field[4], int family) {
  if (answer->idiag_family == family) return field;
  if (answer->idiag_family == AF_INET6 && family == AF_INET && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)field)) {
    return &field[3];
  }
  return NULL;
}

/* The kernel's lookup falls back to a listening socket on the asked source port when no
 * connection matches: for a client on another host or namespace, a listener of this host (any
 * user's) would answer. Only a socket with exactly the four ends asked is the client's. */
static int is_socket_asked(const struct inet_diag_msg *answer, const struct inet_diag_req_v2 *asked) {
  int family = asked->sdiag_family;
  size_t length = (size_t)address_length(family);
  const void *source = answered_address(answer, answer->id.idiag_src, family);
  const void *destination = answered_address(answer, answer->id.idiag_dst, family);
  return answer->id.idiag_sport == asked->id.idiag_sport && answer->id.idiag_dport == asked->id.idiag_dport &&
         source != NULL && destination != NULL && memcmp(source, asked->id.idiag_src, length) == 0 &&
         memcmp(destination, asked->id.idiag_dst, length) == 0;
}

typedef struct socket_owner {
  int found;
  uint32_t uid, inode;
} socket_owner;

/* Reads the one message the kernel answered with; returns 0 or an errno value. */
static int read_answer(const struct nlmsghdr *header, size_t length, const struct inet_diag_req_v2 *asked,
                       socket_owner *owner) {
  if (length < NLMSG_HDRLEN || header->nlmsg_len < NLMSG_HDRLEN || header->nlmsg_len > length ||
      header->nlmsg_seq != SEQUENCE) {
    return EPROTO;
  }
  size_t payload = header->nlmsg_len - NLMSG_HDRLEN;
  if (header->nlmsg_type == NLMSG_ERROR) {
    const struct nlmsgerr *failure = NLMSG_DATA(header);
    if (payload < sizeof *failure || failure->error >= 0) return EPROTO;
    return failure->error == -ENOENT ? 0 : -failure->error;
  }
  if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY || payload < sizeof(struct inet_diag_msg)) return EPROTO;
  const struct inet_diag_msg *answer = NLMSG_DATA(header);
  /* A socket no process holds (inode 0: time-wait, orphaned while closing, a half-open request)
   * has no user: the kernel answers uid 0 for some of these, which is not root. */
  owner->found = answer->idiag_inode != 0 && is_socket_asked(answer, asked);
  owner->uid = answer->idiag_uid;
  owner->inode = answer->idiag_inode;
  return 0;
}

/* Sends the request on a new netlink socket and reads the answer; returns 0 or an errno value, and
 * the call that failed. */
static int exchange(int fd, const diag_request *request, socket_owner *owner, const char **failed_call) {
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(fd, request, sizeof *request, 0, (const struct sockaddr *)&kernel, sizeof kernel) < 0) {
    *failed_call = "sendto";
    return errno;
  }
  /* The kernel answers inside sendto: the answer is queued already, so never wait for one. */
  union {
    struct nlmsghdr header;
    char bytes[8192];
  } answer;
  struct sockaddr_nl sender = {0};
  socklen_t sender_length = sizeof sender;
  ssize_t length;
  do {
    length = recvfrom(fd, &answer, sizeof answer, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&sender, &sender_length);
  } while (length < 0 && errno == EINTR);
  *failed_call = "recvfrom";
  if (length < 0) return errno;
  if ((size_t)length > sizeof answer) return EMSGSIZE;
  /* Only the kernel (port 0) answers; anything else on this port is not the answer. */
  if (sender.nl_pid != 0) return EPROTO;
  *failed_call = "sock_diag";
  return read_answer(&answer.header, (size_t)length, &request->body, owner);
}

static int ask_kernel(const diag_request *request, socket_owner *owner, const char **failed_call) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) {
    *failed_call = "socket";
    return errno;
  }
  int error_number = exchange(fd, request, owner, failed_call);
  close(fd);
  return error_number;
}

static napi_value set_number(napi_env env, napi_value object, const char *name, double number) {
  napi_value value;
  napi_create_double(env, number, &value);
  napi_set_named_property(env, object, name, value);
  return object;
}

static napi_value tcp_peer(napi_env env, napi_callback_info info) {
  napi_value args[4], result;
  endpoint local, remote;
  if (!addon_get_args(env, info, 4, 0, args) || !get_address(env, args[0], &local) || !get_port(env, args[1], &local) ||
      !get_address(env, args[2], &remote) || !get_port(env, args[3], &remote)) {
    return NULL;
  }
  if (local.family != remote.family) return addon_throw_invalid(env, "the local and remote addresses must be of one family");
  diag_request request;
  socket_owner owner = {0};
  const char *failed_call = NULL;
  client_socket_request(&local, &remote, &request);
  int error_number = ask_kernel(&request, &owner, &failed_call);
  if (error_number != 0) return addon_throw_errno(env, failed_call, error_number);
  if (!owner.found) return NULL;
  napi_create_object(env, &result);
  set_number(env, result, "uid", owner.uid);
  return set_number(env, result, "inode", owner.inode);
}

/* ---- A Unix domain socket's peer (SO_PEERCRED) ---- */

static napi_value unix_peer(napi_env env, napi_callback_info info) {
  napi_value args[1], result;
  double number;
  if (!addon_get_args(env, info, 1, 0, args)) return NULL;
  if (!get_integer(env, args[0], 0, INT_MAX, &number)) return addon_throw_invalid(env, "fd must be an integer from 0");
  int fd = (int)number, domain = 0;
  socklen_t length = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0) return addon_throw_errno(env, "getsockopt", errno);
  /* Another kind of socket has no credentials of its peer: its SO_PEERCRED reads as "nobody". */
  if (domain != AF_UNIX) return addon_throw_invalid(env, "fd must be a Unix domain socket");
  struct ucred credentials;
  length = sizeof credentials;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return addon_throw_errno(env, "getsockopt", errno);
  /* An unconnected socket has no peer: the kernel answers uid (uid_t)-1. */
  if (credentials.uid == (uid_t)-1) return NULL;
  napi_create_object(env, &result);
  set_number(env, result, "uid", credentials.uid);
  set_number(env, result, "gid", credentials.gid);
  return set_number(env, result, "pid", credentials.pid);
}

/* ---- A user's groups (the user database, as login would set them) ---- */

/* Whether getpwuid_r's result means "no such user": glibc answers 0 with no entry, and the
 * manual allows these too. */
static int is_unknown_user(int error_number) {
  return error_number == 0 || error_number == ENOENT || error_number == ESRCH || error_number == EBADF ||
         error_number == EPERM;
}

/* The user's entry in a buffer that grows until it fits: returns 0 (`*found` NULL for an unknown
 * user) or an errno value. The caller frees `*buffer`. */
static int user_entry(uid_t uid, struct passwd *entry, struct passwd **found, char **buffer) {
  long suggested = sysconf(_SC_GETPW_R_SIZE_MAX);
  size_t size = suggested > 0 ? (size_t)suggested : 1024;
  for (;;) {
    char *grown = realloc(*buffer, size);
    if (grown == NULL) return ENOMEM;
    *buffer = grown;
    int error_number = getpwuid_r(uid, entry, *buffer, size, found);
    if (error_number != ERANGE) return *found == NULL && is_unknown_user(error_number) ? 0 : error_number;
    if (size >= PASSWD_BUFFER_MAX) return ERANGE;
    size *= 2;
  }
}

/* getgrouplist into an array that grows until the list fits: returns 0 or an errno value. */
static int group_list(const struct passwd *entry, gid_t **groups, int *count) {
  int capacity = 32;
  for (;;) {
    gid_t *grown = realloc(*groups, (size_t)capacity * sizeof(gid_t));
    if (grown == NULL) return ENOMEM;
    *groups = grown;
    *count = capacity;
    errno = 0;
    if (getgrouplist(entry->pw_name, entry->pw_gid, *groups, count) >= 0) return 0;
    /* Too small: glibc and musl say how many there are. Not more than that: it failed. */
    if (*count <= capacity) return errno != 0 ? errno : EIO;
    if (*count > GROUPS_MAX) return E2BIG;
    capacity = *count;
  }
}

static napi_value groups_array(napi_env env, const gid_t *groups, int count) {
  napi_value array, value;
  napi_create_array_with_length(env, (size_t)count, &array);
  for (int index = 0; index < count; index++) {
    napi_create_double(env, groups[index], &value);
    napi_set_element(env, array, (uint32_t)index, value);
  }
  return array;
}

static napi_value user_groups(napi_env env, napi_callback_info info) {
  napi_value args[1], result = NULL;
  uint32_t uid;
  if (!addon_get_args(env, info, 1, 0, args) || !get_id(env, args[0], &uid)) return NULL;
  struct passwd entry, *found = NULL;
  char *buffer = NULL;
  gid_t *groups = NULL;
  int count = 0;
  int error_number = user_entry(uid, &entry, &found, &buffer);
  if (error_number != 0) {
    addon_throw_errno(env, "getpwuid_r", error_number);
  } else if (found == NULL) {
    /* No entry, so no primary group either: the peer is judged as its uid alone. */
    napi_create_array(env, &result);
  } else if ((error_number = group_list(&entry, &groups, &count)) != 0) {
    addon_throw_errno(env, "getgrouplist", error_number);
  } else {
    result = groups_array(env, groups, count);
  }
  free(groups);
  free(buffer);
  return result;
}

/* ---- map()'s peer and the rule ---- */

int peer_identity_get(napi_env env, napi_value value, peer_identity *peer) {
  napi_valuetype type = napi_undefined;
  napi_value uid, gids, gid;
  bool is_array = false;
  uint32_t count = 0;
  memset(peer, 0, sizeof *peer);
  napi_typeof(env, value, &type);
  if (type == napi_undefined) return 1;
  if (type != napi_object) return refuse(env, "a peer must be { uid, gids }");
  /* A getter that throws leaves its exception pending: it is what the caller sees. */
  if (napi_get_named_property(env, value, "uid", &uid) != napi_ok || !get_id(env, uid, &peer->uid) ||
      napi_get_named_property(env, value, "gids", &gids) != napi_ok) {
    return 0;
  }
  napi_is_array(env, gids, &is_array);
  if (is_array) napi_get_array_length(env, gids, &count);
  if (!is_array || count > GROUPS_MAX) return refuse(env, "a peer's gids must be an array of at most 65537 gids");
  peer->gids = count == 0 ? NULL : malloc(count * sizeof(uint32_t));
  if (count != 0 && peer->gids == NULL) {
    addon_throw_errno(env, "malloc", ENOMEM);
    return 0;
  }
  for (peer->gid_count = 0; peer->gid_count < count; peer->gid_count++) {
    if (napi_get_element(env, gids, peer->gid_count, &gid) != napi_ok || !get_id(env, gid, &peer->gids[peer->gid_count])) {
      peer_identity_free(peer);
      return 0;
    }
  }
  peer->given = 1;
  return 1;
}

void peer_identity_free(peer_identity *peer) {
  free(peer->gids);
  memset(peer, 0, sizeof *peer);
}

static int is_member(const peer_identity *peer, gid_t gid) {
  for (uint32_t index = 0; index < peer->gid_count; index++) {
    if (peer->gids[index] == gid) return 1;
  }
  return 0;
}

/* access(2)'s rule for one user: root may (CAP_DAC_OVERRIDE); otherwise exactly one class of the
 * mode decides, the first that the user is in: owner, then group, then others. A class that
 * grants less than another does is not made up for by that other (an owner with --- is refused
 * whatever the others may). ACLs are not read: see lib/addon/peer-identity.ts. */
int peer_may_open_read_write(const peer_identity *peer, const struct stat *object) {
  mode_t wanted;
  if (peer->uid == 0) return 1;
  if (peer->uid == object->st_uid) wanted = S_IRUSR | S_IWUSR;
  else if (is_member(peer, object->st_gid)) wanted = S_IRGRP | S_IWGRP;
  else wanted = S_IROTH | S_IWOTH;
  return (object->st_mode & wanted) == wanted;
}

void peer_init(napi_env env, napi_value exports) {
  napi_property_descriptor functions[] = {
      {"tcpPeer", NULL, tcp_peer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unixPeer", NULL, unix_peer, NULL, NULL, NULL, napi_enumerable, NULL},
      {"userGroups", NULL, user_groups, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions);
}

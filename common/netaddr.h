/*
 * Addresses as the network sees them: the one test of "is this host our own machine" that every side uses (plain
 * HTTP to a local fake platform, a plain tcp:// jobs link).
 */
#ifndef VTS_NETADDR_H
#define VTS_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/*
 * Whether host names the loopback interface: "localhost" (any case), an IPv4 address in 127.0.0.0/8, or the IPv6
 * address ::1, bare or in brackets ("[::1]", as URL parsers give it). The address is parsed, never matched as text:
 * "127.attacker.example" is a name another server answers for, not loopback. No name is resolved.
 */
bool netaddr_is_loopback(const char *host);

/*
 * Addresses a webhook may be sent to. A webhook URL is the client's, so by default it may only reach public
 * addresses; VTS_WEBHOOK_ALLOW names the others an operator permits (a receiver on the machine or the private
 * network), as addresses or CIDR ranges, IPv4 and IPv6. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as
 * the IPv4 address it carries, everywhere below.
 */
#define NETADDR_MAX_ALLOW 32 /* ranges of VTS_WEBHOOK_ALLOW; more is a configuration error */

struct netaddr_range {
  int family; /* AF_INET or AF_INET6 */
  unsigned char addr[16];
  int prefix; /* bits that must match: 0..32 or 0..128 */
};

struct netaddr_allow {
  size_t n;
  struct netaddr_range range[NETADDR_MAX_ALLOW];
};

/*
 * Parses list ("127.0.0.2,10.1.0.0/16,fd00::/8", blanks around entries allowed, "" for none) into out. Returns 0, or
 * -EINVAL with err naming the entry that is not an address or range (host bits set below the prefix are an error:
 * "10.1.2.3/16" is likely a typo).
 */
int netaddr_allow_parse(const char *list, struct netaddr_allow *out, char *err, size_t errlen);

/*
 * Parses an IP literal as a URL's host gives it (an IPv4 dotted quad, or IPv6 with or without brackets) into a
 * sockaddr with port 0. Returns 0, or -EINVAL for anything else (a name, an IPv4 address in another spelling).
 */
int netaddr_parse_literal(const char *host, struct sockaddr_storage *out);

/* Whether sa (AF_INET or AF_INET6) lies in a range of allow. */
bool netaddr_allow_has(const struct netaddr_allow *allow, const struct sockaddr *sa);

/*
 * Whether sa is a public unicast address: not unspecified, loopback, private (RFC 1918, unique local fc00::/7),
 * shared (100.64.0.0/10), link-local, multicast, broadcast, reserved, documentation, benchmarking, or an IPv6 prefix
 * that carries or reaches IPv4 addresses by translation (NAT64, 6to4, Teredo). IPv6 outside 2000::/3 is not public.
 */
bool netaddr_is_public(const struct sockaddr *sa);

#endif

/*
 * Addresses as the network sees them: the one test of "is this host our own machine" that every side uses (plain
 * HTTP to a local fake platform, a plain tcp:// jobs link).
 */
#ifndef VTS_NETADDR_H
#define VTS_NETADDR_H

#include <stdbool.h>

/*
 * Whether host names the loopback interface: "localhost" (any case), an IPv4 address in 127.0.0.0/8, or the IPv6
 * address ::1, bare or in brackets ("[::1]", as URL parsers give it). The address is parsed, never matched as text:
 * "127.attacker.example" is a name another server answers for, not loopback. No name is resolved.
 */
bool netaddr_is_loopback(const char *host);

#endif

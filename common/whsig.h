/*
 * Webhook signatures the Standard Webhooks way: a secret "whsec_" + base64 of its key bytes, given to the client once;
 * each delivery signed with HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.{body}" and sent as
 * "webhook-signature: v1,{base64 of the MAC}", so any of the standard's verifiers checks it.
 */
#ifndef VTS_WHSIG_H
#define VTS_WHSIG_H

#include <stddef.h>
#include <stdint.h>

#define WHSIG_KEY_BYTES 24
#define WHSIG_SECRET_LEN 38    /* "whsec_" + 32 base64 characters (24 bytes) */
#define WHSIG_SIGNATURE_LEN 47 /* "v1," + 44 base64 characters (32 bytes) */

/* A new secret from the kernel's random bytes into out (at least WHSIG_SECRET_LEN + 1). Returns 0 or -errno. */
int whsig_secret_new(char *out, size_t outlen);

/*
 * Signs body for delivery msg_id at timestamp_s (seconds since the epoch) with secret (as whsig_secret_new makes, or
 * any "whsec_" + base64 secret of 1 to 64 key bytes). Writes "v1,..." and a NUL into out (at least
 * WHSIG_SIGNATURE_LEN + 1). Returns 0, or -EINVAL for a secret that is not one, or an out too small.
 */
int whsig_sign(const char *secret, const char *msg_id, int64_t timestamp_s, const char *body, size_t len, char *out,
               size_t outlen);

#endif

#include "common/whsig.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

static const char prefix[] = "whsec_";

int whsig_secret_new(char *out, size_t outlen) {
  if (outlen < WHSIG_SECRET_LEN + 1) return -EINVAL;
  unsigned char key[WHSIG_KEY_BYTES];
  int rv = util_random_bytes(key, sizeof(key));
  if (rv != 0) return rv;
  memcpy(out, prefix, sizeof(prefix) - 1);
  EVP_EncodeBlock((unsigned char *)out + sizeof(prefix) - 1, key, sizeof(key));
  return 0;
}

/* The key bytes of a secret: base64 after the prefix, 1 to 64 bytes. Returns their number, or -EINVAL. */
static int secret_key(const char *secret, unsigned char key[64 + 3]) {
  if (strncmp(secret, prefix, sizeof(prefix) - 1) != 0) return -EINVAL;
  const char *b64 = secret + sizeof(prefix) - 1;
  size_t n = strlen(b64);
  if (n == 0 || n % 4 != 0 || n > 88) return -EINVAL;
  int len = EVP_DecodeBlock(key, (const unsigned char *)b64, (int)n);
  if (len < 0) return -EINVAL;
  /* EVP_DecodeBlock counts the padding's bytes too. */
  if (b64[n - 1] == '=') len--;
  if (b64[n - 2] == '=') len--;
  return len > 0 && len <= 64 ? len : -EINVAL;
}

int whsig_sign(const char *secret, const char *msg_id, int64_t timestamp_s, const char *body, size_t len, char *out,
               size_t outlen) {
  unsigned char key[64 + 3];
  int klen = secret_key(secret, key);
  if (klen < 0 || outlen < WHSIG_SIGNATURE_LEN + 1) return -EINVAL;
  char head[160];
  int hn = snprintf(head, sizeof(head), "%s.%" PRId64 ".", msg_id, timestamp_s);
  if (hn < 0 || (size_t)hn >= sizeof(head)) return -EINVAL;
  unsigned char mac[EVP_MAX_MD_SIZE];
  size_t maclen = 0;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  EVP_MAC_CTX *ctx = hmac != NULL ? EVP_MAC_CTX_new(hmac) : NULL;
  int ok = ctx != NULL && EVP_MAC_init(ctx, key, (size_t)klen, params) == 1 &&
           EVP_MAC_update(ctx, (const unsigned char *)head, (size_t)hn) == 1 &&
           EVP_MAC_update(ctx, (const unsigned char *)body, len) == 1 &&
           EVP_MAC_final(ctx, mac, &maclen, sizeof(mac)) == 1;
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(hmac);
  if (!ok || maclen != 32) return -ENOMEM;
  memcpy(out, "v1,", 3);
  EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)maclen);
  return 0;
}

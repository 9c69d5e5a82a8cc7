/* Stand-in until the video URL module lands. */
#include "gateway/videourl.h"

#include <errno.h>

int videourl_parse(const char *url, size_t len, char id[12]) { (void)url; (void)len; id[0] = 0; return -EINVAL; }

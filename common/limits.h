/*
 * Every limit of vts, declared once, with the answer it produces when exceeded.
 * Values that operators may change are defaults of config.h; the rest are fixed here.
 */
#ifndef VTS_LIMITS_H
#define VTS_LIMITS_H

/*
 * HTTP front (gateway/http/http_conn.c, http_parse.c, http_answer.c). Its timeouts and connection cap are configuration
 * (common/config.c): VTS_HEADER_TIMEOUT_MS (headers not complete in time: 408 and close), VTS_IDLE_TIMEOUT_MS (idle
 * keep-alive: close), VTS_WRITE_TIMEOUT_MS (an answer the client has not read in time: close), VTS_MAX_CONNS (excess
 * answered 503), VTS_DRAIN_TIMEOUT_MS (SIGTERM: in-flight requests get this long).
 */
#define VTS_MAX_REQUEST_LINE_BYTES (8 * 1024)      /* method + URL: 414 */
#define VTS_MAX_HEADER_BYTES (16 * 1024)           /* all header names and values: 431 */
#define VTS_MAX_HEADER_COUNT 64                    /* 431 */
#define VTS_MAX_BODY_BYTES 0                       /* a route that reads no body: Content-Length > 0 is 413 */
#define VTS_MAX_REQUEST_BODY_BYTES (1024 * 1024)   /* a route that reads one (POST /v1/jobs): larger is 413 */
#define VTS_MAX_JOBS_PAGE_BYTES (8 * 1024 * 1024)  /* a page of job items stops past this; next_cursor goes on */
#define VTS_MAX_PIPELINED_REQUESTS 32              /* requests parsed ahead of their responses: reading pauses */
#define VTS_MAX_REQUEST_ID_BYTES 64                /* longer or odd X-Request-Id is replaced by our own */
#define VTS_MAX_API_KEY_BYTES 256                  /* longer x-api-key: 401 */
#define VTS_MAX_ACCEPT_BYTES 512                   /* longer Accept: ignored, the answer is JSON */
#define VTS_MAX_ORIGIN_BYTES 256                   /* longer Origin: /mcp answers 403 */
#define VTS_MAX_ACCEPT_ENCODING_BYTES 256          /* longer Accept-Encoding (all lines): ignored, identity sent */
#define VTS_MAX_IF_NONE_MATCH_BYTES 512            /* longer If-None-Match (all lines): ignored, full answer */
#define VTS_MAX_KEYS_FILE_BYTES (32 * 1024 * 1024) /* larger key file: the load fails, the old keys stay */
#define VTS_MAX_KEYS 100000                        /* more key file entries: the load fails */
#define VTS_MAX_KEY_RATE 1000000                   /* per-key rate field: larger is a malformed line */
#define VTS_MAX_KEY_WINDOW_S 86400                 /* per-key window field (seconds) */
#define VTS_MAX_KEY_QUOTA 1000000000000LL          /* per-key monthly quota field */
#define VTS_MAX_KEY_WEIGHT 100                     /* per-key weight field: its share of batch work, 1 to this */
#define VTS_LINGER_MS 2000                         /* after a closing answer: unread input is discarded this long */
#define VTS_MAX_REFUSED_CONNS 64                   /* over VTS_MAX_CONNS: 503s in progress at once; beyond, closed */
#define VTS_CONN_CAP_RETRY_AFTER_S 1               /* Retry-After of that 503 */
#define VTS_LISTEN_BACKLOG 511                     /* pending connections per worker socket */
#define VTS_MAX_LOGGED_PATH_BYTES 256              /* access log: longer paths are cut */

/* Query parameters (gateway/http/query.c). */
#define VTS_VIDEO_ID_LEN 11
#define VTS_MAX_LANGUAGE_BYTES 12    /* "abc-abcdefgh": longer is 400 invalid_language */
#define VTS_MAX_VIDEO_URL_BYTES 2048 /* longer is 400 invalid_video_url */

/* Gateway <-> fetcher messages (proto/). */
#define VTS_MAX_MESSAGE_BYTES (8 * 1024 * 1024) /* larger messages are refused: 500 */
#define VTS_MAX_TLS_FILE_BYTES (1024 * 1024)    /* VTS_JOBS_TLS_* files: a larger one stops the start */
#define VTS_LINK_HANDSHAKE_LOG_MS 10000         /* failed jobs link handshakes: one log line per peer this often */
#define VTS_LINK_HANDSHAKE_POLL_MS 1000         /* how often each end reads nng's count of failed handshakes */

/* Fetcher (fetcher/). */
#define VTS_MAX_UPSTREAM_BODY_BYTES (8 * 1024 * 1024) /* larger player/caption bodies: 502 */
#define VTS_MAX_WATCH_PAGE_BYTES (4 * 1024 * 1024)    /* larger watch page: 502 */
#define VTS_MAX_SEGMENTS 100000                       /* more caption cues: 502 */
#define VTS_MAX_SPEECH_SEGMENT_S 10.0                 /* longer speech runs are cut at their longest pause */
#define VTS_MAX_TRANSCRIPT_BYTES (6 * 1024 * 1024)    /* larger serialised transcript: 500 */
#define VTS_MAX_JSON_DEPTH 64                         /* deeper upstream JSON: 502 */
#define VTS_UPSTREAM_CONNECT_TIMEOUT_MS 5000
#define VTS_MAX_XML_DEPTH 16               /* deeper caption XML: 502 */
#define VTS_UPSTREAM_MAX_REDIRECTS 3       /* more hops, or a hop to another host: 502 */
#define VTS_UPSTREAM_MAX_PROXIES 16        /* entries of VTS_UPSTREAM_PROXY: more stops the start */
#define VTS_PROXY_BLOCKS_TO_REST 2         /* blocks in a row that send a proxy to rest (VTS_PROXY_REST_MS, doubling) */
#define VTS_PROXY_REST_MAX_FACTOR 16       /* a proxy's rest doubles up to this many times VTS_PROXY_REST_MS */
#define VTS_EGRESS_MAX_DECLINES 3          /* budget declines of a job (VTS_EGRESS_DECLINE); then it is a 502 */
#define VTS_INNERTUBE_MAX_CLIENTS 8        /* entries of VTS_INNERTUBE_CLIENTS: more stops the start */
#define VTS_FETCHER_WATCHDOG_GRACE_MS 2000 /* past the job deadline plus this the process is killed: 500 */
#define VTS_FETCHER_CPU_GRACE_S 30         /* CPU seconds a job may use beyond 2x its deadline: killed, 500 */
#define VTS_FETCHER_MAX_WORKERS 256        /* --workers N */
#define VTS_FETCHER_RESTART_MIN_MS 50      /* first restart delay of a dead child; doubles per quick death */
#define VTS_FETCHER_RESTART_MAX_MS 1000    /* a dead child is always restarted within this */
#define VTS_FETCHER_STABLE_MS 10000        /* a child that lived this long restarts with the minimum delay */
#define VTS_FETCHER_STOP_LINGER_MS 500     /* SIGTERM: wait this long for the last RESULT to be taken */
#define VTS_FETCHER_STOP_TIMEOUT_MS 2000   /* closing the links stuck this long (nng 1.5.2 close race): leave anyway */
#define VTS_JOBS_MAX_URLS 16               /* entries of a fetcher's VTS_JOBS_URL: more stops the start */
#define VTS_FETCHER_MAX_DISPATCHERS 64     /* addresses a fetcher serves; those past it are left out (logged) */
#define VTS_SANDBOX_MAX_PORTS 64           /* TCP ports a confined fetcher may connect to; more are left out */
#define VTS_FETCHER_MAX_OPEN_FILES 1024    /* RLIMIT_NOFILE of a confined fetcher */
#define VTS_FETCHER_MAX_FILE_BYTES (16ULL << 30)  /* RLIMIT_FSIZE: an inherited log file written past it: EFBIG */
#define VTS_MAX_PLAYER_SUMMARY_BYTES (512 * 1024) /* a larger player summary is not kept for reuse */
#define VTS_PLAYER_REUSE_MAX_MS                                                        \
  (30 * 60 * 1000) /* a player summary is reused this long at most (and never past the \
                      expire of its caption URLs) */

/*
 * PO tokens (fetcher/platform/potoken.c): a provider's reply past its cap, or a token past its length, is no token (the
 * track falls through as without a provider: 502 po_token when no other track serves).
 */
#define VTS_POT_MAX_REPLY_BYTES (16 * 1024) /* a provider's reply */
#define VTS_POT_MAX_TOKEN_BYTES 1024        /* a token (real ones are about 150 base64url characters) */
#define VTS_POT_CACHE_SLOTS 16              /* tokens a fetcher process keeps, one per video */
#define VTS_POT_MAX_LIFETIME_S (24 * 3600)  /* a token is kept this long at most, whatever its expiry says */
#define VTS_POT_EXPIRY_MARGIN_MS 2000       /* a kept token is no longer used this close to its expiry */

/* Speech fallback (fetcher/speech/audio.c, decode.c, speech*.c); the duration cap is VTS_SPEECH_MAX_SECONDS. */
#define VTS_MAX_AUDIO_BYTES (200L * 1024 * 1024)        /* larger audio download: 404 (too long to transcribe) */
#define VTS_AUDIO_CHUNK_BYTES (1024L * 1024)            /* bytes per ranged request: unranged ones are throttled */
#define VTS_MAX_AUDIO_REDIRECTS 3                       /* more redirects of an audio URL: 502 */
#define VTS_MAX_AUDIO_STREAMS 16                        /* more streams in an audio container: 500 */
#define VTS_SPEECH_MAX_UPLOAD_BYTES (24L * 1024 * 1024) /* per request to a transcription server (limit 25 MB) */
#define VTS_SPEECH_MAX_UTTERANCE_S 30                   /* pocketsphinx utterance without a pause is cut here */

/* Rate limit and monthly quota (gateway/ratelimit*.c). */
/*
 * Slots of the shared rate-limit table: 2.6 times VTS_MAX_KEYS. Any number of distinct keys in a month is served (no
 * 503): slots of keys whose window and month are over are reused first, and past that a new key takes the slot of
 * the key decided least recently among the few it probes. Such a key is forgotten: its window and month count from
 * zero if it comes back. Since the key file holds at most VTS_MAX_KEYS at once, a key still in it is forgotten only
 * after more than VTS_RATELIMIT_SLOTS - VTS_MAX_KEYS keys retired from the file were used after its own last request.
 */
#define VTS_RATELIMIT_SLOTS 262144
#define VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS 1000 /* quota snapshot to VTS_STATE_DIR at most this often */
#define VTS_RATELIMIT_UNAVAILABLE_RETRY_S 1     /* Retry-After of 503 rate_limit_unavailable */
#define VTS_REDIS_COMMAND_TIMEOUT_MS 50         /* no reply in time: store down for that request (503 or fallback) */
#define VTS_REDIS_RECONNECT_MIN_MS 100          /* reconnect backoff starts here and doubles */
#define VTS_REDIS_RECONNECT_MAX_MS 500          /* ... up to here, so a restarted Redis is back within 1 s */
#define VTS_REDIS_CONNECT_TIMEOUT_MS 250        /* connection not ready (script loaded) in time: redialled */
#define VTS_REDIS_STALL_MS 1000            /* a connection with a timed-out command unanswered this long is redialled */
#define VTS_REDIS_QUOTA_TTL_MARGIN_S 86400 /* a month counter outlives its month by this much */
#define VTS_REDIS_LEASE_IDLE_MS 100        /* a worker's lease of a key's units unused this long goes back to Redis */
#define VTS_GATEWAY_HEARTBEAT_MS 1000      /* each gateway announces itself in Redis this often... */
#define VTS_GATEWAY_HEARTBEAT_TTL_MS 3000  /* ...and counts as sharing the keys' limits this long after */
#define VTS_REDIS_LEASE_MAX 1024           /* units a lease asks for at most (and at most 1/16 of what is left) */
#define VTS_RCACHE_RETRY_MS 1000           /* transcript cache in Redis: after a failure, skipped this long */
#define VTS_RCACHE_COMMAND_TIMEOUT_MS 250  /* the dispatcher's Redis (shared cache, claims): a reply later fails */
#define VTS_JOBS_REDIS_TIMEOUT_MS 250    /* the job store's Redis: a connect or a reply later is 503 jobs_unavailable */
#define VTS_JOBS_REDIS_RETRY_MS 1000     /* ...and the store is not tried again for this long (503 at once)... */
#define VTS_JOBS_REDIS_RETRY_MAX_MS 8000 /* ...doubling while it stays down, up to this */

/* Dispatcher and the workers' link to it (gateway/dispatcher/dispatcher.c, gateway/http/dispatch_client.c). */
#define VTS_DISPATCH_MAX_JOBS 10000           /* distinct jobs queued or running; one more is 500 at once */
#define VTS_DISPATCH_RESULT_GRACE_MS 1000     /* a running job's result may arrive this late; later is 500 */
#define VTS_DISPATCH_SEND_TIMEOUT_MS 1000     /* handing a message to nng takes longer: that request is lost */
#define VTS_DISPATCH_PIPE_TOMBSTONE_MS 10000  /* messages from a closed fetcher connection are refused this long */
#define VTS_DISPATCH_CLIENT_MARGIN_MS 2000    /* a worker waits this much past the dispatcher's deadlines: 500 */
#define VTS_DISPATCH_STOP_TIMEOUT_MS 2000     /* nng teardown stuck this long (nng 1.5.2 close race): leave anyway */
#define VTS_DISPATCH_CONNECT_WAIT_MS 1000     /* a worker without a dispatcher connection this long: 500 */
#define VTS_NO_FETCHER_WARN_MS 10000          /* no fetcher connected this long after the start: a warning */
#define VTS_DISPATCH_RECONNECT_MIN_MS 20      /* worker redial backoff to a restarted dispatcher, from */
#define VTS_DISPATCH_RECONNECT_MAX_MS 500     /* ... up to */
#define VTS_L1_CACHE_BYTES (16 * 1024 * 1024) /* per-worker cache of hot results, bodies and overhead */
#define VTS_L1_CACHE_TTL_MS 5000              /* an L1 entry lives this long at most, never past its shared entry */
/* A transcript hit within this long of its L1 entry's end asks the dispatcher, beside its answer, whether the entry
 * still holds (a 304 renews it): a hot entry never expires under its requests while the shared one lives on. */
#define VTS_L1_REFRESH_AHEAD_MS 1000
#define VTS_L1_VALIDATOR_BYTES                                                        \
  (4 * 1024 * 1024) /* per worker: ETags of transcripts (~150 B each), as long as the \
                       shared entry lives, to answer revalidations with 304 */

/*
 * Compressed forms of a transcript (gateway/cache/entity.c), made once when it enters a worker's L1. A smaller body,
 * and every error, is sent as it is.
 */
#define VTS_COMPRESS_MIN_BYTES 1024        /* a body shorter than this is never compressed */
#define VTS_SENDFILE_MIN_BYTES (64 * 1024) /* a cached body this long goes out with sendfile(2), from a memory file */
#define VTS_GZIP_LEVEL 6                   /* zlib's level: its default balance of time and size */
#define VTS_BROTLI_QUALITY 5               /* brotli's 0..11: 11 costs tens of times more for a few percent */

/* Webhooks of batch jobs (gateway/http/hookurl.c, gateway/dispatcher/hooks.c, fetcher/egress/webhook.c). */
#define VTS_WEBHOOK_URL_MAX_BYTES 2047            /* a longer webhook_url: 400 invalid_request */
#define VTS_WEBHOOK_MAX_PAYLOAD_BYTES (16 * 1024) /* a job's status object is far smaller; a larger is not sent */
#define VTS_WEBHOOK_TIMEOUT_MS 10000              /* one try, connect to status: later is a failed try */
#define VTS_WEBHOOK_MAX_REPLY_BYTES 4096          /* of the receiver's answer body: read this far, ignored */
#define VTS_WEBHOOK_RETRY_WINDOW_MS (24LL * 3600 * 1000) /* no try later than this after the message: given up */

/*
 * Batch jobs of a playlist or a channel (POST /v1/jobs): the ids they name (a 400 past these) and the continuation
 * token of a browse page (a longer one is refused as not the platform's shape).
 */
#define VTS_PLAYLIST_ID_MAX 64           /* bytes of a playlist id */
#define VTS_CHANNEL_ID_LEN 24            /* "UC" and 22 characters */
#define VTS_MAX_BROWSE_TOKEN_BYTES 16384 /* a browse page's continuation token */

#endif

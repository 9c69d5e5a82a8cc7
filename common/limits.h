/*
 * Every limit of vts, declared once, with the answer it produces when exceeded.
 * Values that operators may change are defaults of config.h; the rest are fixed here.
 */
#ifndef VTS_LIMITS_H
#define VTS_LIMITS_H

/* HTTP front (gateway/http.c). */
#define VTS_MAX_REQUEST_LINE_BYTES (8 * 1024)  /* method + URL: 414 */
#define VTS_MAX_HEADER_BYTES (16 * 1024)       /* all header names and values: 431 */
#define VTS_MAX_HEADER_COUNT 64                /* 431 */
#define VTS_MAX_BODY_BYTES 0                   /* GET carries no body: Content-Length > 0 is 413 */
#define VTS_HEADER_TIMEOUT_MS_DEFAULT 10000    /* headers not complete in time: 408 and close */
#define VTS_IDLE_TIMEOUT_MS_DEFAULT 60000      /* idle keep-alive: close */
#define VTS_MAX_CONNS_PER_WORKER_DEFAULT 16384 /* excess refused at accept */
#define VTS_MAX_PIPELINED_REQUESTS 32          /* requests parsed ahead of their responses: reading pauses */
#define VTS_DRAIN_TIMEOUT_MS_DEFAULT 10000     /* SIGTERM: in-flight requests get this long */
#define VTS_MAX_REQUEST_ID_BYTES 64            /* longer or odd X-Request-Id is replaced by our own */
#define VTS_MAX_API_KEY_BYTES 256              /* longer x-api-key: 401 */

/* Query parameters (gateway/query.c). */
#define VTS_VIDEO_ID_LEN 11
#define VTS_MAX_LANGUAGE_BYTES 12              /* "abc-abcdefgh": longer is 400 invalid_language */
#define VTS_MAX_VIDEO_URL_BYTES 2048           /* longer is 400 invalid_video_url */

/* Gateway <-> fetcher messages (proto/). */
#define VTS_MAX_MESSAGE_BYTES (8 * 1024 * 1024) /* larger messages are refused: 500 */

/* Fetcher (fetcher/). */
#define VTS_MAX_UPSTREAM_BODY_BYTES (8 * 1024 * 1024) /* larger player/caption bodies: 502 */
#define VTS_MAX_WATCH_PAGE_BYTES (4 * 1024 * 1024)    /* larger watch page: 502 */
#define VTS_MAX_SEGMENTS 100000                       /* more caption cues: 502 */
#define VTS_MAX_TRANSCRIPT_BYTES (6 * 1024 * 1024)    /* larger serialised transcript: 500 */
#define VTS_MAX_JSON_DEPTH 64                         /* deeper upstream JSON: 502 */
#define VTS_UPSTREAM_CONNECT_TIMEOUT_MS 5000
#define VTS_FETCHER_ADDRESS_SPACE_BYTES (1024UL * 1024 * 1024) /* setrlimit(RLIMIT_AS) */

/* Dispatcher and the workers' link to it (gateway/dispatcher.c, gateway/dispatch_client.c). */
#define VTS_DISPATCH_MAX_JOBS 10000            /* distinct jobs queued or running; one more is 500 at once */
#define VTS_DISPATCH_RESULT_GRACE_MS 1000      /* a running job's result may arrive this late; later is 500 */
#define VTS_DISPATCH_SEND_TIMEOUT_MS 1000      /* handing a message to nng takes longer: that request is lost */
#define VTS_DISPATCH_PIPE_TOMBSTONE_MS 10000   /* messages from a closed fetcher connection are refused this long */
#define VTS_DISPATCH_CLIENT_MARGIN_MS 2000     /* a worker waits this much past the dispatcher's deadlines: 500 */
#define VTS_DISPATCH_STOP_TIMEOUT_MS 2000      /* nng teardown stuck this long (nng 1.5.2 close race): leave anyway */
#define VTS_DISPATCH_CONNECT_WAIT_MS 1000      /* a worker without a dispatcher connection this long: 500 */
#define VTS_DISPATCH_RECONNECT_MIN_MS 20       /* worker redial backoff to a restarted dispatcher, from */
#define VTS_DISPATCH_RECONNECT_MAX_MS 500      /* ... up to */
#define VTS_L1_CACHE_BYTES (16 * 1024 * 1024)  /* per-worker cache of hot results, bodies and overhead */
#define VTS_L1_CACHE_TTL_MS 5000               /* an L1 entry lives this long at most, never past its shared entry */

#endif

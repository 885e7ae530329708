/* The status codes' names, shared by host and device. */
#include "poet/status.h"

const char *poet_status_str(poet_status s)
{
    switch (s) {
    case POET_OK: return "ok";
    case POET_ERR_NOMEM: return "out of memory";
    case POET_ERR_INVALID: return "invalid value";
    case POET_ERR_PARSE: return "malformed input";
    case POET_ERR_IO: return "input/output error";
    case POET_ERR_LIMIT: return "limit exceeded";
    case POET_ERR_NOT_FOUND: return "not found";
    case POET_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}

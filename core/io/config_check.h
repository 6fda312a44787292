/* One entry point that checks roper's model config, for programs that are not roper (the PyTorch
 * companion calls it through Python's ctypes from libroper.so, docs/interop.md): the config as
 * JSON in, core's verdict and message out, so that the rules and their words have one home,
 * core. */
#ifndef RP_CONFIG_CHECK_H
#define RP_CONFIG_CHECK_H

#include <stddef.h>

#include "status.h"

/* How rp_config_check_json reads its config. */
typedef enum {
    RP_CONFIG_WRITTEN = 0, /* as rp.model reads a config a user wrote: each key the JSON holds
                            * checked as given (rp_model_cfg_check_key, given = 1: a fraction_q
                            * of 0 refused), then rp_model_cfg_plan (option rotate on a rotary
                            * pe, every rule, keys that do nothing refused) */
    RP_CONFIG_STORED = 1   /* as a file's reader reads roper.config: rp_model_cfg_check, the
                            * messages in the file reader's words ("bad roper.config (...)",
                            * "bad model config: ...") */
} rp_config_how;

/* Checks the config in json (n bytes, not NUL-terminated: a JSON object of rp.model's keys as
 * roper.config holds them, rp_model_cfg_from_json; its required keys present, the others at their
 * defaults when left out) read as `how` says. Returns RP_OK, or the first refusal's status
 * (RP_ERR_ARG) with its message (rp_last_error's) copied into msg (msg_n bytes, NUL-terminated,
 * cut at msg_n - 1; msg may be NULL when msg_n is 0); msg is "" on RP_OK. Keeps no state: safe
 * to call from any thread (the message is also the thread's rp_last_error). */
rp_status rp_config_check_json(const char *json, size_t n, int how, char *msg, size_t msg_n);

#endif

/* The entry points that check a config for programs that are not roper (core/io/config_check.h,
 * which the PyTorch companion calls through ctypes): each verdict and message against the one
 * rp.model gives for the same config (written out here as rp.model prints them, less its
 * "bad argument #1 to 'rp.model' (...)" frame), the message buffer's contract (cut at msg_n - 1,
 * NUL-terminated, "" on success, NULL with msg_n 0), a config that is not NUL-terminated, and a
 * file that is not a safetensors file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config_check.h"

/* The keys a roper.config must hold (the schema's required JSON rows), a small model at rp.model's
 * defaults. */
static const char *const base_keys[][2] = {
    {"vocab", "8"},         {"d_model", "16"},         {"heads", "2"},
    {"layers", "1"},        {"d_ff", "8"},             {"seq_len", "8"},
    {"norm", "\"pre\""},    {"activation", "\"relu\""}, {"pe", "\"rope\""},
    {"fraction_qk", "1"},   {"fraction_v", "1"},       {"base", "10000"},
    {"pairing", "\"half\""}, {"attention", "\"softmax\""}, {"linear_rope", "\"after\""},
};
enum { NBASE = (int)(sizeof base_keys / sizeof base_keys[0]) };

/* The base config as JSON into buf, with the keys of extra (pairs "key", "value", ending with
 * NULL) replacing or joining the base's. Returns its length. */
static int cfg_json(char *buf, size_t n, const char *const *extra)
{
    size_t len = 0;
    len += (size_t)snprintf(buf + len, n - len, "{");
    for (int i = 0; i < NBASE; i++) {
        const char *v = base_keys[i][1];
        for (int j = 0; extra && extra[j]; j += 2)
            if (strcmp(extra[j], base_keys[i][0]) == 0) v = extra[j + 1];
        len += (size_t)snprintf(buf + len, n - len, "%s\"%s\": %s", i ? ", " : "",
                                base_keys[i][0], v);
    }
    for (int j = 0; extra && extra[j]; j += 2) {
        int in_base = 0;
        for (int i = 0; i < NBASE; i++) in_base |= strcmp(extra[j], base_keys[i][0]) == 0;
        if (!in_base)
            len += (size_t)snprintf(buf + len, n - len, ", \"%s\": %s", extra[j], extra[j + 1]);
    }
    len += (size_t)snprintf(buf + len, n - len, "}");
    return (int)len;
}

/* Checks the base config with extra as a user's (RP_CONFIG_WRITTEN): want, and msg exactly. */
static void check_written(const char *const *extra, rp_status want, const char *msg)
{
    char json[1024], got[512];
    int len = cfg_json(json, sizeof json, extra);
    rp_status s = rp_config_check_json(json, (size_t)len, RP_CONFIG_WRITTEN, got, sizeof got);
    CHECK(s == want, "%s: status %d, want %d (%s)", json, (int)s, (int)want, got);
    CHECK(strcmp(got, msg) == 0, "%s: message\n  got  '%s'\n  want '%s'", json, got, msg);
}

#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})

int main(void)
{
    /* verdicts and messages: rp.model's words for the same configs */
    check_written(NULL, RP_OK, "");
    check_written(KV("pe", "\"roper\"", "fraction_v", "0.5"), RP_OK, "");
    check_written(KV("heads", "3"), RP_ERR_ARG, "d_model 16 is not divisible by heads 3");
    check_written(KV("fraction_qk", "0.1"), RP_ERR_ARG,
                  "fraction_qk 0.1 gives d_rot 0 for d_k 8; it must be even and >= 2");
    check_written(KV("pe", "\"none\"", "xpos", "0.4"), RP_ERR_ARG,
                  "scaling and xpos need a rotary pe (rope, roper or roper_legacy) with softmax "
                  "attention, not none");
    check_written(KV("pe", "\"t5\"", "rel_max_distance", "3"), RP_ERR_ARG,
                  "rel_max_distance 3 must be in 17..2147483647");

    /* rp_config_check_shown: the values a rope_scaling table set, in its fields' names (rp.model's
     * words: "option 'rope_scaling': " is the caller's frame); a key counts when json holds it */
    {
        char cj[1024], sg[512];
        const char *sh = "{\"yarn_alpha\": \"'beta_slow'\", \"yarn_beta\": \"'beta_fast'\"}";
        int cl = cfg_json(cj, sizeof cj, KV("scaling", "\"yarn\"", "orig_len", "8",
                                            "yarn_alpha", "40"));
        CHECK(rp_config_check_shown(cj, (size_t)cl, sh, strlen(sh), sg, sizeof sg) == RP_ERR_ARG,
              "beta_slow above beta_fast refused");
        CHECK(strcmp(sg, "'beta_slow' 40 must be below 'beta_fast' 32 (YaRN's ramp runs from the "
                         "first to the second)") == 0, "in the fields' names: '%s'", sg);
        CHECK(rp_config_check_shown(cj, (size_t)cl, "{}", 2, sg, sizeof sg) == RP_OK &&
                  sg[0] == '\0', "nothing shown: left to rp_config_check_json");
        const char *other = "{\"scaling_factor\": \"'factor'\"}"; /* not in json: not given */
        CHECK(rp_config_check_shown(cj, (size_t)cl, other, strlen(other), sg, sizeof sg) == RP_OK,
              "a shown key json does not hold: %s", sg);
        cl = cfg_json(cj, sizeof cj, KV("heads", "\"x\""));
        CHECK(rp_config_check_shown(cj, (size_t)cl, sh, strlen(sh), sg, sizeof sg) == RP_OK,
              "a config rp_model_cfg_from_json refuses passes here: %s", sg);
        const char *bad[] = {"[1]", "{\"bogus\": \"x\"}", "{\"yarn_alpha\": 3}", "{"};
        const char *why[] = {"rp_config_check_shown: shown must be a JSON object",
                             "rp_config_check_shown: shown maps config keys to strings",
                             "rp_config_check_shown: shown maps config keys to strings", NULL};
        cl = cfg_json(cj, sizeof cj, NULL);
        for (int i = 0; i < 4; i++) {
            CHECK(rp_config_check_shown(cj, (size_t)cl, bad[i], strlen(bad[i]), sg, sizeof sg) ==
                      RP_ERR_ARG, "shown %s refused", bad[i]);
            CHECK(!why[i] || strcmp(sg, why[i]) == 0, "shown %s: '%s'", bad[i], sg);
        }
        CHECK(rp_config_check_shown(NULL, 0, sh, strlen(sh), sg, sizeof sg) == RP_ERR_ARG,
              "NULL json refused");
    }

    /* the message buffer: cut at msg_n - 1 and NUL-terminated; NULL with msg_n 0 */
    char json[1024], small[8];
    int len = cfg_json(json, sizeof json, KV("heads", "3"));
    memset(small, 'x', sizeof small);
    CHECK(rp_config_check_json(json, (size_t)len, RP_CONFIG_WRITTEN, small, sizeof small) ==
              RP_ERR_ARG,
          "a refusal into a small buffer");
    CHECK(strcmp(small, "d_model") == 0, "cut at msg_n - 1: '%s'", small);
    CHECK(rp_config_check_json(json, (size_t)len, RP_CONFIG_WRITTEN, NULL, 0) == RP_ERR_ARG,
          "msg NULL with msg_n 0");
    CHECK(strcmp(rp_last_error(), "d_model 16 is not divisible by heads 3") == 0,
          "the thread's last error: '%s'", rp_last_error());

    /* n bytes are read, no more: a config followed by garbage and no NUL */
    char buf[1200];
    len = cfg_json(buf, sizeof buf, NULL);
    memset(buf + len, '}', sizeof buf - (size_t)len); /* no NUL after the config */
    char got[256];
    CHECK(rp_config_check_json(buf, (size_t)len, RP_CONFIG_WRITTEN, got, sizeof got) == RP_OK,
          "a config of n bytes without a NUL after it: %s", got);
    /* and a cut config is refused, not read past */
    CHECK(rp_config_check_json(buf, (size_t)len - 1, RP_CONFIG_WRITTEN, got, sizeof got) != RP_OK,
          "a config cut before its closing brace");
    CHECK(got[0] != '\0', "its refusal has a message");

    /* a file that is not a safetensors file: a one-line "path: ..." refusal */
    char dir[] = "/tmp/rp_config_check.XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL, "a scratch folder");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "a scratch file");
    if (f) {
        fputs("not a safetensors file", f);
        fclose(f);
        CHECK(rp_config_check_file(path, got, sizeof got) != RP_OK, "a file of text refused");
        CHECK(strncmp(got, path, strlen(path)) == 0 && strchr(got, '\n') == NULL,
              "names the file, one line: '%s'", got);
        remove(path);
    }
    rmdir(dir);
    CHECK(rp_config_check_file("no/such/file.safetensors", got, sizeof got) != RP_OK,
          "a missing file refused");
    CHECK(strstr(got, "no/such/file.safetensors") != NULL, "names the missing file: '%s'", got);
    return check_summary("test_config_check");
}

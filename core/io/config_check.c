/* rp_config_check_json: core's checks of a config given as JSON (config_check.h). */
#include "config_check.h"

#include <stdio.h>

#include "json.h"
#include "model.h"
#include "model_schema.h"
#include "plan.h"
#include "safetensors.h"

/* rp.model's check of each value a user gave (rp_model_cfg_check_key with given = 1, in row
 * order): the keys the object in json holds, their values in c. */
static rp_status check_given(const char *json, size_t n, const rp_model_cfg *c)
{
    rp_json_doc doc;
    rp_status st = rp_json_parse(&doc, json, n, 4096);
    int given[RP_CFG_MAX_KEYS] = {0};
    for (size_t m = st == RP_OK ? doc.nodes[0].first : RP_JSON_NONE; m != RP_JSON_NONE;
         m = doc.nodes[m].next) {
        const rp_cfg_key *k = rp_model_cfg_key(doc.strings + doc.nodes[m].key,
                                               doc.nodes[m].key_len);
        if (k) given[k - rp_model_cfg_keys] = 1;
    }
    rp_json_free(&doc);
    for (int i = 0; st == RP_OK && i < rp_model_cfg_nkeys; i++)
        if (given[i]) st = rp_model_cfg_check_key(c, &rp_model_cfg_keys[i], 1);
    return st;
}

rp_status rp_config_check_json(const char *json, size_t n, int how, char *msg, size_t msg_n)
{
    rp_model_cfg cfg;
    rp_status st;
    if (!json && n) {
        st = rp_error(RP_ERR_ARG, "rp_config_check_json: NULL json");
    } else if (how != RP_CONFIG_WRITTEN && how != RP_CONFIG_STORED) {
        st = rp_error(RP_ERR_ARG, "rp_config_check_json: how must be RP_CONFIG_WRITTEN or "
                                  "RP_CONFIG_STORED, got %d", how);
    } else if (how == RP_CONFIG_WRITTEN) {
        st = rp_model_cfg_from_json(json ? json : "", n, &cfg);
        if (st == RP_OK) st = check_given(json ? json : "", n, &cfg);
        if (st == RP_OK) st = rp_model_cfg_plan(&cfg, NULL);
    } else if ((st = rp_model_cfg_from_json(json ? json : "", n, &cfg)) != RP_OK) {
        st = rp_error_why(st, NULL, rp_cfg_json_msgs[RP_CFGJ_BAD_FILE].text);
    } else if ((st = rp_model_cfg_check(&cfg)) != RP_OK) {
        st = rp_error_why(st, NULL, rp_cfg_json_msgs[RP_CFGJ_BAD_MODEL].text);
    }
    if (msg && msg_n) snprintf(msg, msg_n, "%s", st == RP_OK ? "" : rp_last_error());
    return st;
}

/* rp_config_check_json: core's checks of a config given as JSON (config_check.h). */
#include "config_check.h"

#include <stdio.h>

#include "model.h"
#include "plan.h"
#include "safetensors.h"

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
        if (st == RP_OK) st = rp_model_cfg_plan(&cfg, NULL);
    } else if ((st = rp_model_cfg_from_json(json ? json : "", n, &cfg)) != RP_OK) {
        st = rp_error_why(st, NULL, rp_cfg_json_msgs[RP_CFGJ_BAD_FILE].text);
    } else if ((st = rp_model_cfg_check(&cfg)) != RP_OK) {
        st = rp_error_why(st, NULL, rp_cfg_json_msgs[RP_CFGJ_BAD_MODEL].text);
    }
    if (msg && msg_n) snprintf(msg, msg_n, "%s", st == RP_OK ? "" : rp_last_error());
    return st;
}

/* The vector-position options' planner (core/nn/axes_plan.h): every rule with its message in
 * both wordings (rp.model's options, a safetensors file's metadata), the order of the rules
 * (rule by rule, or table by table for the file), the marks (not expanded inside the caller's
 * values) and the calls that pass. The messages are written out here, as the users see them. */
#include "check.h"

/* A call of rp.model's wording: map (-1: absent), A, positions given, angles given, sections
 * entries (-1: absent), mix given. */
static rp_axes_given opt(int map, int64_t A, int pos, int angles, int64_t sections, int mix)
{
    rp_axes_given g = {.map = map, .A = A, .pos_given = pos, .angles_given = angles};
    g.given[RP_AXES_SECTIONS] = sections >= 0, g.rows[RP_AXES_SECTIONS] = sections;
    g.given[RP_AXES_MIXED] = mix, g.rows[RP_AXES_MIXED] = -1;
    return g;
}

/* A file's call (the names of core/io/safetensors.c): sections, mix rows (-1: absent). */
static rp_axes_given meta(int map, int64_t A, int64_t sections, int64_t mix)
{
    rp_axes_given g = {.map = map, .A = A, .pos_given = A > 0, .axes_name = "roper.axes",
                       .positions_name = "roper.positions"};
    g.table_name[RP_AXES_SECTIONS] = "roper.sections", g.table_name[RP_AXES_MIXED] = "roper.mix";
    g.given[RP_AXES_SECTIONS] = sections >= 0, g.rows[RP_AXES_SECTIONS] = sections;
    g.given[RP_AXES_MIXED] = mix >= 0, g.rows[RP_AXES_MIXED] = mix;
    g.tensor[RP_AXES_SECTIONS] = "\"s\"", g.shape[RP_AXES_SECTIONS] = "[3]";
    g.tensor[RP_AXES_MIXED] = "\"m{map}\"", g.shape[RP_AXES_MIXED] = "[3 x 4]";
    return g;
}

#define OPT RP_AXW_OPTION
#define META RP_AXW_METADATA

int main(void)
{
    rp_axes_given g;
    /* the descriptor */
    CHECK(rp_axes_maps[RP_AXES_AXIAL].table == NULL, "axial owns no table");
    CHECK(strcmp(rp_axes_maps[RP_AXES_SECTIONS].table, "sections") == 0, "sections owns sections");
    CHECK(strcmp(rp_axes_maps[RP_AXES_MIXED].table, "mix") == 0, "mixed owns mix");
    CHECK(strcmp(rp_axes_rule_names[RP_AXR_ANGLES], "angles") == 0 &&
              rp_axes_rule_names[RP_AXR_COUNT] == NULL, "rule names");

    /* rp.model's wording: each rule */
    g = opt(RP_AXES_SECTIONS, 0, 0, 0, -1, 0);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'axes' needs option 'positions' "
              "(vector positions: an [n x axes] tensor or a list of {r, c} lists)");
    g = opt(-1, 0, 0, 0, -1, 1);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'mix' needs option 'positions' "
              "(vector positions: an [n x axes] tensor or a list of {r, c} lists)");
    g = opt(-1, 0, 1, 0, 2, 1);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'sections' does nothing with 1-D "
              "positions (give the positions as [n x axes] or a list of {r, c} lists)");
    g = opt(-1, 2, 1, 0, 2, 0);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'sections' does nothing with axes "
              "\"axial\" (it gives the pairs of axes \"sections\")");
    g = opt(RP_AXES_SECTIONS, 2, 1, 0, 2, 1);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'mix' does nothing with axes "
              "\"sections\" (it is the frequency matrix of axes \"mixed\")");
    g = opt(RP_AXES_SECTIONS, 2, 1, 0, -1, 0);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "axes \"sections\" needs option 'sections' "
              "(the pairs of each axis, e.g. {16, 24, 24})");
    g = opt(RP_AXES_MIXED, 2, 1, 0, -1, 0);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "axes \"mixed\" needs option 'mix' (the "
              "[axes x d_rot/2] frequency matrix)");
    g = opt(RP_AXES_SECTIONS, 2, 1, 0, 3, 0);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'sections' has 3 entries; the "
              "positions have 2 axes");
    g = opt(-1, 3, 1, 1, -1, 0);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'angles' (a table of one position per "
              "row) needs scalar positions; these have 3 axes");
    /* rule by rule: mix's "does nothing" before sections' "needed" and "rows" */
    g = opt(RP_AXES_SECTIONS, 2, 1, 0, -1, 1);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'mix' does nothing with axes "
              "\"sections\" (it is the frequency matrix of axes \"mixed\")");
    g = opt(RP_AXES_SECTIONS, 2, 1, 0, 1, 1);
    CHECK_MSG(rp_axes_plan(OPT, &g), RP_ERR_ARG, "option 'mix' does nothing with axes "
              "\"sections\" (it is the frequency matrix of axes \"mixed\")");
    /* the ones that pass: nothing given, each map with its table, angles with one axis, mix's
     * rows not checked here (-1) */
    g = opt(-1, 0, 0, 1, -1, 0);
    CHECK_STATUS(rp_axes_plan(OPT, &g), RP_OK, NULL);
    g = opt(-1, 2, 1, 0, -1, 0);
    CHECK_STATUS(rp_axes_plan(OPT, &g), RP_OK, NULL);
    g = opt(RP_AXES_SECTIONS, 3, 1, 0, 3, 0);
    CHECK_STATUS(rp_axes_plan(OPT, &g), RP_OK, NULL);
    g = opt(RP_AXES_MIXED, 2, 1, 0, -1, 1);
    CHECK_STATUS(rp_axes_plan(OPT, &g), RP_OK, NULL);
    g = opt(RP_AXES_AXIAL, 1, 1, 1, -1, 0);
    CHECK_STATUS(rp_axes_plan(OPT, &g), RP_OK, NULL);

    /* the file's wording: no positions rule (A = 0 is its scalar rule), no angles rule */
    g = meta(RP_AXES_AXIAL, 0, -1, -1);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "the metadata's roper.axes needs vector "
              "positions (roper.positions [rows x axes])");
    g = meta(-1, 0, -1, 2);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "the metadata's roper.mix needs vector "
              "positions (roper.positions [rows x axes])");
    g = meta(RP_AXES_MIXED, 2, 2, 2);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "the metadata's roper.sections does nothing "
              "with roper.axes \"mixed\"");
    g = meta(RP_AXES_MIXED, 2, -1, -1);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "roper.axes \"mixed\" needs the metadata's "
              "roper.mix");
    g = meta(RP_AXES_SECTIONS, 2, 3, -1);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "tensor \"s\" (the metadata's "
              "roper.sections) is [3]; the positions have 2 axes");
    /* a mark inside the caller's value stays as it is */
    g = meta(RP_AXES_MIXED, 2, -1, 3);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "tensor \"m{map}\" (the metadata's roper.mix) "
              "is [3 x 4]; the positions have 2 axes");
    /* table by table: sections' "needed" and "rows" before mix's "does nothing" */
    g = meta(RP_AXES_SECTIONS, 2, -1, 2);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "roper.axes \"sections\" needs the metadata's "
              "roper.sections");
    g = meta(RP_AXES_SECTIONS, 2, 1, 2);
    CHECK_MSG(rp_axes_plan(META, &g), RP_ERR_ARG, "tensor \"s\" (the metadata's roper.sections) "
              "is [3]; the positions have 2 axes");
    g = meta(-1, 2, -1, -1);
    g.angles_given = 1;
    CHECK_STATUS(rp_axes_plan(META, &g), RP_OK, NULL);
    g = meta(RP_AXES_MIXED, 3, -1, 3);
    CHECK_STATUS(rp_axes_plan(META, &g), RP_OK, NULL);

    /* bad calls */
    g = opt(-1, 0, 0, 0, -1, 0);
    CHECK_STATUS(rp_axes_plan(RP_AXW_COUNT, &g), RP_ERR_ARG, "bad wording");
    CHECK_STATUS(rp_axes_plan(OPT, NULL), RP_ERR_ARG, "bad wording");
    g.map = RP_AXES_COUNT;
    CHECK_STATUS(rp_axes_plan(OPT, &g), RP_ERR_ARG, "bad wording or map");
    return check_summary("test_axes_plan");
}

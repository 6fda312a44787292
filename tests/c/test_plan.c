/* The planners (core/config/plan.h): rp_attention_plan's widths, defaults, positions and refusals
 * against naive computations written here (floor(f * D), the largest entry of each side's rows),
 * its exact messages, and rp_model_cfg_plan's half and rows. */
#include "check.h"

static rp_attn_request request(rp_pe pe, int64_t T, int64_t S, int64_t D, int64_t Dv)
{
    rp_attn_request r = rp_attention_request_default();
    r.B = 2, r.T = T, r.S = S, r.H = 3, r.D = D, r.Dv = Dv;
    r.keys.pe.mode = pe;
    return r;
}

/* The bit of row name in keys_given. */
static uint64_t given_bit(const char *name)
{
    return (uint64_t)1 << (rp_model_cfg_key(name, (size_t)-1) - rp_model_cfg_keys);
}

/* Every rotary mode and rotate mask with fractions of D and Dv: the widths are floor(f * size)
 * of the placement's own fraction when given, else the shared one, 0 where not rotated; half the
 * largest of them / 2. */
static void test_widths(void)
{
    int n = 0;
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++) {
        const rp_pe_mode *m = rp_pe_mode_of((rp_pe)pe);
        if (!m->rotary) continue;
        for (int rot = 0; rot <= RP_ROT_ALL; rot++)
            for (int own = 0; own < 2; own++) {
                rp_attn_request r = request((rp_pe)pe, 5, 7, 16, 24);
                int eff = rot ? rot : m->rotate;
                r.keys.pe.rotate = rot;
                /* a fraction only where its placement is rotated: elsewhere it does nothing */
                if (eff & (RP_ROT_Q | RP_ROT_K)) r.keys.pe.fraction_qk = 0.5;
                if (eff & (RP_ROT_V | RP_ROT_O)) r.keys.pe.fraction_v = 0.75;
                const char *name[4] = {"fraction_q", "fraction_k", NULL, "fraction_o"};
                double *own_f[4] = {&r.keys.pe.fraction_q, &r.keys.pe.fraction_k, NULL,
                                    &r.keys.pe.fraction_o};
                double ownv[4] = {0.25, 1.0, 0.0, 0.5};
                for (int i = 0; i < 4 && own; i++)
                    if (name[i] && (eff & (1 << i)))
                        *own_f[i] = ownv[i], r.keys_given |= given_bit(name[i]);
                rp_attn_plan p;
                rp_status st = rp_attention_plan(&r, &p);
                CHECK(st == RP_OK, "%s rotate %d: %s", m->name, rot, rp_last_error());
                double f[4] = {own ? 0.25 : 0.5, own ? 1.0 : 0.5, 0.75, own ? 0.5 : 0.75};
                int64_t size[4] = {16, 16, 24, 24}, want[4], got[4] = {p.cfg.scheme.d_rot_q,
                    p.cfg.scheme.d_rot_k, p.cfg.scheme.d_rot_v, p.cfg.scheme.d_rot_o}, half = 0;
                for (int i = 0; i < 4; i++) {
                    want[i] = eff & (1 << i) ? (int64_t)floor(f[i] * (double)size[i]) : 0;
                    if (want[i] / 2 > half) half = want[i] / 2;
                    CHECK(got[i] == want[i], "%s rotate %d own %d placement %d: %lld, want %lld",
                          m->name, rot, own, i, (long long)got[i], (long long)want[i]);
                }
                CHECK(p.half == half, "%s rotate %d: half %lld, want %lld", m->name, rot,
                      (long long)p.half, (long long)half);
                n++;
            }
    }
    CHECK(n == 3 * 16 * 2, "the rotary modes: %d cases", n);
}

/* q_offset defaults to S - T, the scale to 1 / sqrt(D); the last positions each side reads,
 * from pos_offset or from the rows of explicit positions (the largest entry, 0 at least). */
static void test_positions(void)
{
    rp_attn_request r = request(RP_PE_ROPE, 3, 8, 8, 8);
    r.given = RP_GIVEN_POS_OFFSET, r.pos_offset = 100;
    rp_attn_plan p;
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_OK, NULL);
    CHECK(p.cfg.q_offset == 5 && p.qlast == 107 && p.klast == 107 && p.rows == 108,
          "q_offset %lld, qlast %lld, klast %lld, rows %lld", (long long)p.cfg.q_offset,
          (long long)p.qlast, (long long)p.klast, (long long)p.rows);
    CHECK(p.cfg.scale == 1.0 / sqrt(8.0), "scale %g", p.cfg.scale);

    /* 2-D positions: keys rows 0..7, queries rows 2..4 (q_offset 2) */
    int64_t pos[10 * 2];
    for (int i = 0; i < 20; i++) pos[i] = (i * 37) % 23 - 4;
    r = request(RP_PE_ROPE, 3, 8, 8, 8);
    r.given = RP_GIVEN_Q_OFFSET, r.q_offset = 2;
    r.pos = pos, r.pos_rows = 10, r.axes = 2;
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_OK, NULL);
    int64_t qw = 0, kw = 0;
    for (int i = 2 * 2; i < 5 * 2; i++) qw = pos[i] > qw ? pos[i] : qw;
    for (int i = 0; i < 8 * 2; i++) kw = pos[i] > kw ? pos[i] : kw;
    CHECK(p.qlast == qw && p.klast == kw && p.need == 8 && p.cfg.pos == pos,
          "qlast %lld (want %lld), klast %lld (want %lld), need %lld", (long long)p.qlast,
          (long long)qw, (long long)p.klast, (long long)kw, (long long)p.need);
    r.pos_rows = 7;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'positions' holds 7 positions; this call reads 8 (keys 0..7, queries 2..4)");

    /* the last position the offsets make, 2^53 at most (each offset within 2^53 on its own): the
     * keys' (pos_offset + S - 1), or the queries' past them (pos_offset + q_offset + T - 1) */
    const int64_t top = (int64_t)1 << 53;
    r = request(RP_PE_ROPE, 3, 8, 8, 8);
    r.given = RP_GIVEN_POS_OFFSET, r.pos_offset = top - 7;
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_OK, NULL);
    CHECK(p.klast == top && p.rows == top + 1, "keys to 2^53: klast %lld", (long long)p.klast);
    r.pos_offset = top - 6;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "positions run from pos_offset = 9007199254740986 to 9007199254740993, past 2^53");
    CHECK(p.arg == 4, "the options: arg %d", p.arg);
    r.given = RP_GIVEN_POS_OFFSET | RP_GIVEN_Q_OFFSET, r.pos_offset = top - 9, r.q_offset = 7;
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_OK, NULL); /* queries at 2^53 - 2 .. 2^53 */
    r.q_offset = 8;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "positions run from pos_offset + q_offset = 9007199254740991 to 9007199254740993, "
              "past 2^53");
    r.pos_offset = 0, r.q_offset = top;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "positions run from pos_offset + q_offset = 9007199254740992 to 9007199254740994, "
              "past 2^53");
    r = request(RP_PE_NONE, 3, 8, 8, 8); /* whatever the pe */
    r.given = RP_GIVEN_POS_OFFSET, r.pos_offset = top;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "positions run from pos_offset = 9007199254740992 to 9007199254740999, past 2^53");
    CHECK_STATUS(rp_option_position_span("offset", top, 1), RP_OK, NULL);
    CHECK_STATUS(rp_option_position_span("offset", top + 5, 0), RP_OK, NULL);
    CHECK_STATUS(rp_option_position_span("offset", -top, 3), RP_OK, NULL);
    CHECK_MSG(rp_option_position_span("offset", top, 2), RP_ERR_ARG,
              "positions run from offset = 9007199254740992 to 9007199254740993, past 2^53");
}

/* The messages, as rp.attention raises them (numbers as Lua prints them), and the argument. */
static void test_refusals(void)
{
    rp_attn_plan p;
    rp_attn_request r = request(RP_PE_ROPE, 4, 4, 16, 16);
    r.keys.pe.fraction_qk = 2.0;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'fraction_qk' must be in (0, 1], got 2.0");
    r.keys.pe.fraction_qk = 1.000000001; /* Lua's 14 digits */
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'fraction_qk' must be in (0, 1], got 1.000000001");
    r.keys.pe.fraction_qk = 1.5;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'fraction_qk' must be in (0, 1], got 1.5");
    r.keys.pe.fraction_qk = 0.1;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "d_rot must be at least 2, got 1 (from fraction_qk 0.1 of D = 16)");
    r = request(RP_PE_ROPER, 4, 4, 16, 14);
    r.keys.pe.fraction_o = 0.5, r.keys_given = given_bit("fraction_o");
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "d_rot must be even, got 7 (from fraction_o 0.5 of Dv = 14)");
    r = request(RP_PE_SHAW, 4, 4, 16, 16);
    r.keys.pe.rotate = RP_ROT_V;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'rotate' needs a rotary pe (rope, roper or roper_legacy), got pe 'shaw'");
    r = request((rp_pe)RP_PE_COUNT, 4, 4, 16, 16); /* a caller in C: refused, not read */
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_ERR_ARG, "unknown pe");
    r = request(RP_PE_NONE, 5, 4, 16, 16);
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "default q_offset = S - T = -1 is negative (T = 5 queries, S = 4 keys); pass "
              "option 'q_offset'");
    CHECK(p.arg == 4, "arg %d", p.arg);
    r = request(RP_PE_NONE, (int64_t)1 << 31, (int64_t)1 << 31, 1, 1);
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "attention sizes T, S, D, Dv must be at most 2^31-1");
    CHECK(p.arg == 1, "arg %d", p.arg);
    r = request(RP_PE_SHAW, 4, 4, 16, 16);
    r.keys.rel.clip = 2;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'rel_k' (shaw's a^K, [5 x 16]) is required by pe 'shaw'");
    r.tables[RP_TAB_EK] = (rp_plan_table){.given = 1, .ndim = 2, .shape = {4, 16}};
    r.tables[RP_TAB_EV] = (rp_plan_table){.given = 1, .ndim = 2, .shape = {5, 16}};
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "option 'rel_k' (shaw's a^K): expected [5 x 16], got [4 x 16]");
    r.tables[RP_TAB_EK].shape[0] = 5;
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_OK, NULL);
    r.tables[RP_TAB_BIAS] = (rp_plan_table){.given = 1, .ndim = 2, .shape = {3, 32}};
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG, "option 'rel_bias' is not used by pe 'shaw'");
    /* the frequency scalars need something rotated, before the keys that do nothing */
    r = request(RP_PE_NONE, 4, 4, 16, 16);
    r.keys.freq.scaling = RP_SCALING_PI, r.keys.freq.factor = 2.0;
    rp_rope_freq f = rp_model_cfg_freq(&r.keys);
    r.freq = &f;
    CHECK_MSG(rp_attention_plan(&r, &p), RP_ERR_ARG,
              "scaling, xpos, freq and angles need a rotary pe (rope, roper or roper_legacy), "
              "not none");
    r = request(RP_PE_SHAW, 4, 4, 16, 16);
    r.tables[RP_TAB_EK] = (rp_plan_table){.given = 1, .ndim = 2, .shape = {33, 16}};
    r.tables[RP_TAB_EV] = (rp_plan_table){.given = 1, .ndim = 2, .shape = {33, 16}};
    r.keys.pe.base = 500.0;
    CHECK_STATUS(rp_attention_plan(&r, &p), RP_ERR_ARG, "base 500 does nothing for pe shaw");
}

/* rp_model_cfg_plan: the rotate rule as rp.model words it, and half and rows for a grid of
 * configs against the largest floor(fraction * d_k) / 2 of the rotated placements. */
static void test_model(void)
{
    rp_model_cfg c = rp_model_cfg_default(16);
    c.pe.mode = RP_PE_ALIBI, c.pe.rotate = RP_ROT_Q;
    CHECK_MSG(rp_model_cfg_plan(&c, NULL), RP_ERR_ARG,
              "option 'rotate' needs a rotary pe (rope, roper or roper_legacy), got pe 'alibi'");
    const double fr[] = {1.0, 0.5, 0.25};
    for (int pe = RP_PE_ROPE; pe <= RP_PE_ROPER; pe++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < (pe == RP_PE_ROPER ? 3 : 1); j++) { /* rope: v does nothing */
                c = rp_model_cfg_default(16);
                c.pe.mode = (rp_pe)pe, c.d_model = 64, c.heads = 2, c.seq_len = 40;
                c.pe.fraction_qk = fr[i], c.pe.fraction_v = fr[j];
                rp_model_plan p;
                CHECK_STATUS(rp_model_cfg_plan(&c, &p), RP_OK, NULL);
                int64_t want = (int64_t)floor(fr[i] * 32.0) / 2;
                int64_t wv = (int64_t)floor(fr[j] * 32.0) / 2;
                if (pe == RP_PE_ROPER && wv > want) want = wv;
                CHECK(p.half == want && p.rows == 40, "pe %d fractions %g %g: half %lld, want "
                      "%lld; rows %lld", pe, fr[i], fr[j], (long long)p.half, (long long)want,
                      (long long)p.rows);
            }
}

/* rp_linear_attention_plan: every mode that runs with linear attention (pe.h's linear column)
 * with fractions of D and Dv: d_rot_qk = floor(f * D) where the mode rotates q, d_rot_v =
 * floor(f * Dv) where it rotates v, else the sizes (rp_linattn_cfg_default); the options copied;
 * the refusals with their exact messages and arguments. */
static void test_linear(void)
{
    int n = 0;
    for (int pe = 0; pe < (int)RP_PE_COUNT; pe++) {
        const rp_pe_mode *m = rp_pe_mode_of((rp_pe)pe);
        if (!m->linear) continue;
        rp_linattn_request r = rp_linear_attention_request_default();
        r.B = 2, r.T = 5, r.H = 3, r.D = 16, r.Dv = 24;
        r.keys.pe.mode = (rp_pe)pe;
        if (m->rotary) r.keys.pe.base = 500, r.keys.pe.pairing = RP_PAIR_INTERLEAVED;
        if (m->rotary) r.keys.linear_rope = RP_LIN_BEFORE;
        if (m->rotate & RP_ROT_Q) r.keys.pe.fraction_qk = 0.5;
        if (m->rotate & RP_ROT_V) r.keys.pe.fraction_v = 0.75;
        r.eps = 1e-3, r.q_offset = 9;
        rp_linattn_plan p;
        CHECK_STATUS(rp_linear_attention_plan(&r, &p), RP_OK, NULL);
        int64_t wqk = m->rotate & RP_ROT_Q ? (int64_t)floor(0.5 * 16.0) : 0;
        int64_t wv = m->rotate & RP_ROT_V ? (int64_t)floor(0.75 * 24.0) : 0;
        const rp_pe_scheme *sc = &p.cfg.scheme;
        CHECK(sc->pe == (rp_pe)pe && sc->d_rot_q == wqk && sc->d_rot_k == wqk &&
                  sc->d_rot_v == wv && sc->d_rot_o == wv && sc->rotate == m->rotate &&
                  p.cfg.eps == 1e-3 && p.cfg.q_offset == 9 &&
                  sc->base == (m->rotary ? 500.0 : RP_ROPE_BASE) &&
                  sc->pairing == (m->rotary ? RP_PAIR_INTERLEAVED : RP_PAIR_HALF) &&
                  p.cfg.placement == (m->rotary ? RP_LIN_BEFORE : RP_LIN_AFTER),
              "%s: d_rot %lld %lld, want %lld %lld", m->name, (long long)sc->d_rot_q,
              (long long)sc->d_rot_v, (long long)wqk, (long long)wv);
        CHECK(rp_linattn_check(r.D, r.Dv, &p.cfg) == RP_OK, "%s: %s", m->name, rp_last_error());
        n++;
    }
    CHECK(n == 5, "%d modes run with linear attention, want 5", n);

    struct {
        rp_pe pe;
        double fqk, fv;
        int64_t q_offset, T;
        int arg;
        const char *msg;
    } bad[] = {
        {RP_PE_ROPE, 0.1, 1, 0, 5, 4, "d_rot must be at least 2, got 1 (from fraction_qk 0.1 of "
                                      "D = 16)"},
        {RP_PE_ROPER, 1, 1.5, 0, 5, 4, "option 'fraction_v' must be in (0, 1], got 1.5"},
        {RP_PE_NONE, 0.5, 1, 0, 5, 4, "fraction_qk 0.5 does nothing for pe none: it applies to "
                                      "the rotary modes (rope, roper or roper_legacy)"},
        {RP_PE_ROPE, 1, 0.5, 0, 5, 4, "fraction_v 0.5 does nothing for pe rope rotating qk: it "
                                      "applies when v or o is rotated"},
        {RP_PE_NONE, 1, 1, -1, 5, 4, "option 'q_offset' must be between 0 and 2^53, got -1"},
        {RP_PE_ROPE, 1, 1, ((int64_t)1 << 53) - 3, 5, 4,
         "positions run from q_offset = 9007199254740989 to 9007199254740993, past 2^53"},
        {RP_PE_NONE, 1, 1, 0, (int64_t)1 << 31, 1, "attention sizes T, D, Dv must be at most "
                                                   "2^31-1"},
        {RP_PE_NONE, 1, 1, 0, (int64_t)1 << 20, 2, "weights [B x H x T x T] would be too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rp_linattn_request r = rp_linear_attention_request_default();
        r.B = 2, r.T = bad[i].T, r.H = 3, r.D = 16, r.Dv = 24;
        r.keys.pe.mode = bad[i].pe;
        r.keys.pe.fraction_qk = bad[i].fqk, r.keys.pe.fraction_v = bad[i].fv;
        r.q_offset = bad[i].q_offset;
        rp_linattn_plan p;
        CHECK_MSG(rp_linear_attention_plan(&r, &p), RP_ERR_ARG, bad[i].msg);
        CHECK(p.arg == bad[i].arg, "case %zu: arg %d, want %d", i, p.arg, bad[i].arg);
    }
    rp_linattn_request r = rp_linear_attention_request_default();
    r.keys.pe.mode = RP_PE_SHAW;
    rp_linattn_plan p;
    CHECK_STATUS(rp_linear_attention_plan(&r, &p), RP_ERR_ARG, NULL);
}

/* The rotary calls' frequency options: orig_len's rule and the positions below an angle table,
 * in the words the bindings raise (freq_spec, hf_rope_spec, axes_spec assert them from Lua). */
static void test_freq_options(void)
{
    rp_model_cfg view = rp_model_cfg_default(1);
    rp_rope_freq f;
    CHECK_STATUS(rp_freq_plan_scalars(&view, 0, 0, 0.0, &f), RP_OK, NULL);
    CHECK(f.orig_len == 0 && rp_rope_freq_is_plain(&f), "no scaling: orig_len %lld",
          (long long)f.orig_len);
    CHECK_MSG(rp_freq_plan_scalars(&view, 1, 0, 0.0, &f), RP_ERR_ARG,
              "option 'orig_len' must be an integer >= 1, got 0");
    view.freq.scaling = RP_SCALING_YARN, view.freq.factor = 4.0;
    CHECK_MSG(rp_freq_plan_scalars(&view, 0, 0, 0.0, &f), RP_ERR_ARG,
              "option 'orig_len' (the original context length) is required with scaling "
              "\"yarn\"");
    CHECK_MSG(rp_freq_plan_scalars(&view, 0, 1, 0.0, &f), RP_ERR_ARG,
              "option 'orig_len' (the original context length) is required with scaling "
              "\"yarn\" (rope_scaling's original_max_position_embeddings)");
    CHECK_STATUS(rp_freq_plan_scalars(&view, 0, 0, 64.0, &f), RP_OK, NULL);
    CHECK(f.orig_len == 64, "the call's own orig_len: %lld", (long long)f.orig_len);
    view.freq.orig_len = 32;
    CHECK_STATUS(rp_freq_plan_scalars(&view, 1, 0, 64.0, &f), RP_OK, NULL);
    CHECK(f.orig_len == 32 && f.scaling == RP_SCALING_YARN, "the given orig_len: %lld",
          (long long)f.orig_len);

    int64_t pos[4] = {0, 3, -2, -5};
    CHECK(rp_freq_plan_rows(pos, 0, 4) == 4 && rp_freq_plan_rows(NULL, 5, 3) == 8 &&
              rp_freq_plan_rows(NULL, 0, 0) == 1 && rp_freq_plan_rows(pos + 2, 0, 2) == 1,
          "rows");
    double angles[4 * 2] = {0};
    rp_rope_freq a = rp_rope_freq_default();
    a.angles = angles, a.rows = 4, a.n_angles = 2;
    CHECK_MSG(rp_freq_plan_positions(&a, 4, pos, 0, 4), RP_ERR_ARG,
              "position -2 is below 0, where the angle table starts");
    CHECK_MSG(rp_freq_plan_positions(&a, 4, NULL, -1, 3), RP_ERR_ARG,
              "position -1 is below 0, where the angle table starts");
    CHECK_STATUS(rp_freq_plan_positions(&a, 4, pos, 0, 2), RP_OK, NULL);
    CHECK_STATUS(rp_freq_plan_positions(&a, 4, NULL, -1, 0), RP_OK, NULL);
    CHECK_STATUS(rp_freq_plan_positions(&a, 4, NULL, 0, 5), RP_ERR_ARG, NULL); /* 4 rows */
    rp_rope_freq plain = rp_rope_freq_default();
    CHECK_STATUS(rp_freq_plan_positions(&plain, 4, pos, 0, 4), RP_OK, NULL);
}

int main(void)
{
    test_widths();
    test_positions();
    test_refusals();
    test_model();
    test_linear();
    test_freq_options();
    return check_summary("test_plan");
}

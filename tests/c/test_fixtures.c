/* The whole model (core/model/model.h) against golden fixtures computed by an independent PyTorch
 * reference (tests/reference/make_fixtures.py; format and origin in tests/fixtures/README.md).
 *
 * For every tests/fixtures/NAME.rpfx (or $ROPER_FIXTURES/NAME.rpfx): build the model with the stored
 * config, copy the stored parameters into it through rp_model_param_view, run rp_model_forward on
 * the stored batch (tokens, targets with a -1, a mask with zeros) and rp_model_backward, and
 * compare the logits, the loss and every parameter gradient with the reference. Each fixture runs
 * twice: with max_batch = B and with max_batch = B + 2 (activation buffers sized for more
 * sequences than the forward uses), after filling the gradient buffer with garbage and zeroing it.
 * The files of the placement cases (rope_vo, ...) also carry rotate and fraction_q/_k/_o; a
 * missing key reads as 0 (the mode's own placements, inherited widths). The files of the relative
 * modes (shaw, xl, t5, deberta, alibi) carry rel_clip, rel_buckets and rel_max_distance; a missing
 * one reads as the model's default (rp_model_cfg_default: 16, 32, 128).
 *
 * Tolerance: the reference is float64 (stored rounded to float32); the C model computes in
 * float32 with its own summation orders (sgemm blocking, OpenMP), so the error we expect is float32
 * rounding noise accumulated over a few hundred operations per output. Torch's own float32 run of
 * the same model deviates from its float64 run by at most ~7e-7 of the tensor's largest magnitude
 * on these fixtures (stored per tensor as torch_f32_maxabs.* and printed next to ours). We allow
 *     |got - want| <= RTOL * max|want|,   RTOL = 1e-5,
 * per tensor: ~15x torch's float32 noise, so reordered sums pass, while any real mistake (a wrong
 * angle sign, pairing, position, mask, LayerNorm parameter, scale) moves values by 1e-3 or more of
 * the magnitude. The scale is the tensor's max because elementwise relative error is meaningless
 * for entries that cancel to ~0 (it is printed as well, over entries >= 1e-3 * max|want|).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rp.h"

#define RTOL 1e-5

/* Fixtures that must be present (more may be, and are checked too). */
static const char *const required[] = {
    "rope", "roper", "roper_legacy", "none", "roper_partial", "roper_interleaved", "roper_post_gelu",
    "learned",
    /* the placement ablation */
    "rope_vo", "rope_qkv_widths", "roper_legacy_ko", "rope_q_only", "roper_legacy_qvo_interleaved",
    /* the relative modes */
    "shaw", "xl", "t5", "deberta", "alibi", "deberta_post_gelu"};

/* ---- the fixture file ---------------------------------------------------------------------- */

typedef struct {
    char name[64];
    int64_t ival;
    double dval;
    int ndim;
    int64_t shape[4];
    int64_t numel;
    float *data;
} fx_entry;

typedef struct {
    uint32_t version;
    int nint, ndbl, narr;
    fx_entry *ints, *dbls, *arrs;
} fixture;

typedef struct {
    const unsigned char *p;
    size_t n, pos;
    int bad;
} reader;

static int rd_bytes(reader *r, void *dst, size_t n)
{
    if (r->bad || n > r->n - r->pos) {
        r->bad = 1;
        return 0;
    }
    memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return 1;
}

static uint32_t rd_u32(reader *r)
{
    uint32_t v = 0;
    rd_bytes(r, &v, 4);
    return v;
}

static int rd_name(reader *r, char *name, size_t cap)
{
    uint32_t len = rd_u32(r);
    if (r->bad || len >= cap) {
        r->bad = 1;
        return 0;
    }
    if (!rd_bytes(r, name, len)) return 0;
    name[len] = 0;
    return 1;
}

static void fixture_free(fixture *f)
{
    for (int i = 0; i < f->narr; i++) free(f->arrs[i].data);
    free(f->ints);
    free(f->dbls);
    free(f->arrs);
    memset(f, 0, sizeof *f);
}

/* Reads a fixture; 0 with a message printed on failure. The format is little-endian (checked). */
static int fixture_load(fixture *f, const char *path)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        printf("cannot open %s\n", path);
        return 0;
    }
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = size > 0 ? malloc((size_t)size) : NULL;
    if (!buf || fread(buf, 1, (size_t)size, fp) != (size_t)size) {
        printf("cannot read %s\n", path);
        free(buf);
        fclose(fp);
        return 0;
    }
    fclose(fp);
    reader r = {buf, (size_t)size, 0, 0};
    char magic[4];
    rd_bytes(&r, magic, 4);
    f->version = rd_u32(&r);
    if (r.bad || memcmp(magic, "RPFX", 4) != 0 || f->version != 1) {
        printf("%s: not an RPFX version 1 file\n", path);
        free(buf);
        return 0;
    }
    f->nint = (int)rd_u32(&r);
    f->ints = calloc((size_t)f->nint + 1, sizeof(fx_entry));
    for (int i = 0; i < f->nint && !r.bad; i++) {
        rd_name(&r, f->ints[i].name, sizeof f->ints[i].name);
        rd_bytes(&r, &f->ints[i].ival, 8);
    }
    f->ndbl = (int)rd_u32(&r);
    f->dbls = calloc((size_t)f->ndbl + 1, sizeof(fx_entry));
    for (int i = 0; i < f->ndbl && !r.bad; i++) {
        rd_name(&r, f->dbls[i].name, sizeof f->dbls[i].name);
        rd_bytes(&r, &f->dbls[i].dval, 8);
    }
    f->narr = (int)rd_u32(&r);
    f->arrs = calloc((size_t)f->narr + 1, sizeof(fx_entry));
    for (int i = 0; i < f->narr && !r.bad; i++) {
        fx_entry *e = &f->arrs[i];
        rd_name(&r, e->name, sizeof e->name);
        e->ndim = (int)rd_u32(&r);
        if (e->ndim < 0 || e->ndim > 4) {
            r.bad = 1;
            break;
        }
        e->numel = 1;
        for (int d = 0; d < e->ndim; d++) {
            rd_bytes(&r, &e->shape[d], 8);
            if (e->shape[d] < 0 || e->shape[d] > (1 << 20)) r.bad = 1;
            e->numel *= e->shape[d];
        }
        if (r.bad) break;
        e->data = malloc((size_t)e->numel * sizeof(float) + 1);
        rd_bytes(&r, e->data, (size_t)e->numel * sizeof(float));
    }
    int ok = !r.bad && r.pos == r.n;
    free(buf);
    if (!ok) {
        printf("%s: truncated or malformed (at byte %zu of %zu)\n", path, r.pos, r.n);
        fixture_free(f);
    }
    return ok;
}

static const fx_entry *find(const fx_entry *e, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0) return &e[i];
    return NULL;
}

static int64_t fx_int(const fixture *f, const char *name, int *ok)
{
    const fx_entry *e = find(f->ints, f->nint, name);
    if (!e) {
        printf("fixture has no int \"%s\"\n", name);
        *ok = 0;
        return 0;
    }
    return e->ival;
}

static double fx_dbl(const fixture *f, const char *name, int *ok)
{
    const fx_entry *e = find(f->dbls, f->ndbl, name);
    if (!e) {
        if (ok) {
            printf("fixture has no double \"%s\"\n", name);
            *ok = 0;
        }
        return NAN;
    }
    return e->dval;
}

/* The placement keys (rotate, fraction_q, fraction_k, fraction_o) are only in the files of the
 * placement cases: a missing one reads as 0, the model's own default (the mode's rotate, the
 * inherited widths). */
static int64_t fx_int_or0(const fixture *f, const char *name)
{
    const fx_entry *e = find(f->ints, f->nint, name);
    return e ? e->ival : 0;
}

/* The relative modes' keys (rel_clip, rel_buckets, rel_max_distance) are only in their files: a
 * missing one reads as dflt, the model's default. */
static int64_t fx_int_or(const fixture *f, const char *name, int64_t dflt)
{
    const fx_entry *e = find(f->ints, f->nint, name);
    return e ? e->ival : dflt;
}

static double fx_dbl_or0(const fixture *f, const char *name)
{
    const fx_entry *e = find(f->dbls, f->ndbl, name);
    return e ? e->dval : 0.0;
}

static const fx_entry *fx_arr(const fixture *f, const char *name)
{
    return find(f->arrs, f->narr, name);
}

static int is_param_array(const char *name)
{
    static const char *const batch[] = {"tokens", "targets", "mask", "logits", "loss"};
    for (size_t i = 0; i < sizeof batch / sizeof batch[0]; i++)
        if (strcmp(name, batch[i]) == 0) return 0;
    return strncmp(name, "grad.", 5) != 0;
}

/* ---- comparison ---------------------------------------------------------------------------- */

typedef struct {
    double worst_norm;      /* max over tensors of max|err| / max|want| */
    char worst_name[64];
} case_stats;

/* Compares n values; prints one line (always when verbose, else on failure) and counts a check. */
static void compare(const char *label, const char *tensor, const float *got, const float *want,
                    int64_t n, double torch_noise, int verbose, case_stats *cs)
{
    double maxw = 0, maxerr = 0, maxrel = 0;
    int64_t imax = 0, nonfinite = 0;
    for (int64_t i = 0; i < n; i++) maxw = fmax(maxw, fabs((double)want[i]));
    for (int64_t i = 0; i < n; i++) {
        double g = (double)got[i], w = (double)want[i];
        if (!isfinite(g)) {
            nonfinite++;
            continue;
        }
        double e = fabs(g - w);
        if (e > maxerr) {
            maxerr = e;
            imax = i;
        }
        if (fabs(w) >= 1e-3 * maxw && fabs(w) > 0) maxrel = fmax(maxrel, e / fabs(w));
    }
    double tol = fmax(RTOL * maxw, 1e-30);
    double norm = maxw > 0 ? maxerr / maxw : maxerr;
    int ok = nonfinite == 0 && maxerr <= tol;
    if (cs && norm > cs->worst_norm) {
        cs->worst_norm = norm;
        snprintf(cs->worst_name, sizeof cs->worst_name, "%s", tensor);
    }
    if (verbose || !ok)
        printf("  %s %-30s max|err| %.2e [%lld]  max|ref| %.2e  err/max|ref| %.1e  max rel %.1e"
               "  (torch f32: %.1e)%s\n",
               ok ? "ok  " : "FAIL", tensor, maxerr, (long long)imax, maxw, norm, maxrel,
               maxw > 0 ? torch_noise / maxw : torch_noise, ok ? "" : "  <-- exceeds RTOL");
    if (!ok) {
        int shown = 0;
        for (int64_t i = 0; i < n && shown < 5; i++) {
            double g = (double)got[i], w = (double)want[i];
            if (!isfinite(g) || fabs(g - w) > tol) {
                printf("       [%lld] got %.9g want %.9g\n", (long long)i, g, w);
                shown++;
            }
        }
    }
    CHECK(ok, "%s: %s differs from the reference (max|err| %.3g, tol %.3g, %lld non-finite)",
          label, tensor, maxerr, tol, (long long)nonfinite);
}

/* ---- one fixture --------------------------------------------------------------------------- */

static void run_fixture(const char *path, const char *label)
{
    fixture f;
    if (!CHECK(fixture_load(&f, path), "%s: fixture loads", label)) return;
    int ok = 1;
    int64_t B = fx_int(&f, "batch", &ok), T = fx_int(&f, "T", &ok);
    rp_model_cfg cfg = rp_model_cfg_default(fx_int(&f, "vocab", &ok));
    cfg.d_model = fx_int(&f, "d_model", &ok);
    cfg.heads = fx_int(&f, "heads", &ok);
    cfg.layers = fx_int(&f, "layers", &ok);
    cfg.d_ff = fx_int(&f, "d_ff", &ok);
    cfg.seq_len = fx_int(&f, "seq_len", &ok);
    cfg.norm = (rp_norm)fx_int(&f, "norm", &ok);
    cfg.act = (rp_act)fx_int(&f, "act", &ok);
    cfg.pe.mode = (rp_pe)fx_int(&f, "pe", &ok);
    cfg.pe.pairing = (rp_pairing)fx_int(&f, "pairing", &ok);
    cfg.pe.fraction_qk = fx_dbl(&f, "fraction_qk", &ok);
    cfg.pe.fraction_v = fx_dbl(&f, "fraction_v", &ok);
    cfg.pe.base = fx_dbl(&f, "rope_base", &ok);
    cfg.dropout = fx_dbl(&f, "dropout", &ok);
    cfg.pe.rotate = (int)fx_int_or0(&f, "rotate");
    cfg.pe.fraction_q = fx_dbl_or0(&f, "fraction_q");
    cfg.pe.fraction_k = fx_dbl_or0(&f, "fraction_k");
    cfg.pe.fraction_o = fx_dbl_or0(&f, "fraction_o");
    cfg.rel.clip = fx_int_or(&f, "rel_clip", cfg.rel.clip);
    cfg.rel.buckets = fx_int_or(&f, "rel_buckets", cfg.rel.buckets);
    cfg.rel.max_distance = fx_int_or(&f, "rel_max_distance", cfg.rel.max_distance);
    cfg.seed = 99;  /* irrelevant: every parameter is overwritten */
    double loss_ref = fx_dbl(&f, "loss_f64", &ok);
    const fx_entry *tok = fx_arr(&f, "tokens"), *tgt = fx_arr(&f, "targets"),
                   *msk = fx_arr(&f, "mask"), *logits_ref = fx_arr(&f, "logits");
    if (!CHECK(ok && tok && tgt && msk && logits_ref && tok->numel == B * T &&
                   tgt->numel == B * T && msk->numel == B * T &&
                   logits_ref->numel == B * T * cfg.vocab,
               "%s: fixture has the config, the batch and the logits", label)) {
        fixture_free(&f);
        return;
    }
    char rot[5];
    printf("%s: pe %s, rotate %s, norm %s, act %s, pairing %s, fractions qk %g v %g q %g k %g o %g"
           ", base %g, rel clip %lld buckets %lld max_distance %lld, heads %lld, B %lld, T %lld\n",
           label, rp_pe_name(cfg.pe.mode),
           cfg.pe.rotate ? rp_rotate_name(cfg.pe.rotate, rot) : "(own)",
           cfg.norm == RP_NORM_PRE ? "pre" : "post", cfg.act == RP_ACT_RELU ? "relu" : "gelu",
           cfg.pe.pairing == RP_PAIR_HALF ? "half" : "interleaved", cfg.pe.fraction_qk,
           cfg.pe.fraction_v, cfg.pe.fraction_q, cfg.pe.fraction_k, cfg.pe.fraction_o, cfg.pe.base,
           (long long)cfg.rel.clip, (long long)cfg.rel.buckets, (long long)cfg.rel.max_distance,
           (long long)cfg.heads, (long long)B, (long long)T);

    int32_t *tokens = malloc((size_t)(B * T) * sizeof(int32_t));
    int32_t *targets = malloc((size_t)(B * T) * sizeof(int32_t));
    uint8_t *mask = malloc((size_t)(B * T));
    for (int64_t i = 0; i < B * T; i++) {
        tokens[i] = (int32_t)tok->data[i];
        targets[i] = (int32_t)tgt->data[i];
        mask[i] = msk->data[i] != 0.0f;
    }

    for (int pass = 0; pass < 2; pass++) {
        cfg.max_batch = B + 2 * pass;
        char lab[128];
        snprintf(lab, sizeof lab, "%s (max_batch %lld)", label, (long long)cfg.max_batch);
        rp_model *m = rp_model_new(&cfg);
        if (!CHECK(m != NULL, "%s: rp_model_new: %s", lab, rp_last_error())) continue;
        case_stats cs = {0, ""};

        /* Parameters: the layouts must agree both ways (names, order irrelevant, shapes). */
        int nfx = 0;
        for (int a = 0; a < f.narr; a++) nfx += is_param_array(f.arrs[a].name);
        CHECK(rp_model_num_tensors(m) == nfx, "%s: model has %d parameters, fixture %d", lab,
              rp_model_num_tensors(m), nfx);
        int loaded = 1;
        for (int i = 0; i < rp_model_num_tensors(m); i++) {
            const rp_param_info *p = rp_model_param(m, i);
            const fx_entry *e = fx_arr(&f, p->name);
            int same = e && e->ndim == p->ndim && e->numel == p->numel;
            for (int d = 0; same && d < p->ndim; d++) same = e->shape[d] == p->shape[d];
            if (!CHECK(same, "%s: parameter %s is in the fixture with the same shape", lab,
                       p->name)) {
                loaded = 0;
                continue;
            }
            rp_tensor t;
            rp_model_param_view(&t, m, i, 0);
            check_scatter(&t, e->data);
            rp_tensor_release(&t);
        }
        if (!loaded) {
            rp_model_free(m);
            continue;
        }

        /* Garbage in the gradient buffer first: zero_grad must clear it, backward accumulates. */
        rp_storage *gs = rp_model_grads(m);
        for (size_t i = 0; i < gs->n; i++) gs->data[i] = 1e3f;
        rp_model_zero_grad(m);

        CHECK_STATUS(rp_model_check_tokens(m, tokens, targets, B, T), RP_OK, NULL);
        float loss = NAN;
        if (!CHECK_STATUS(rp_model_forward(m, tokens, targets, mask, B, T, 0, &loss), RP_OK,
                          NULL)) {
            rp_model_free(m);
            continue;
        }
        int verbose = pass == 0;
        compare(lab, "logits", rp_model_logits(m), logits_ref->data, B * T * cfg.vocab,
                fx_dbl(&f, "torch_f32_maxabs.logits", NULL), verbose, &cs);
        float loss_want = (float)loss_ref;
        compare(lab, "loss", &loss, &loss_want, 1, fx_dbl(&f, "torch_f32_maxabs.loss", NULL),
                verbose, &cs);
        if (verbose)
            printf("       loss: C %.9g, torch float64 %.9g, diff %.2e\n", (double)loss, loss_ref,
                   (double)loss - loss_ref);

        if (CHECK_STATUS(rp_model_backward(m), RP_OK, NULL)) {
            float *buf = malloc((size_t)rp_model_param_count(m) * sizeof(float));
            for (int i = 0; i < rp_model_num_tensors(m); i++) {
                const rp_param_info *p = rp_model_param(m, i);
                char gname[96], nname[128];
                snprintf(gname, sizeof gname, "grad.%s", p->name);
                snprintf(nname, sizeof nname, "torch_f32_maxabs.%s", gname);
                const fx_entry *e = fx_arr(&f, gname);
                if (!CHECK(e && e->numel == p->numel, "%s: fixture has %s", lab, gname)) continue;
                rp_tensor t;
                rp_model_param_view(&t, m, i, 1);
                check_gather(buf, &t);
                rp_tensor_release(&t);
                compare(lab, gname, buf, e->data, p->numel, fx_dbl(&f, nname, NULL), verbose, &cs);
            }
            free(buf);
        }
        printf("  %s: worst err/max|ref| %.2e (%s), tolerance %.0e\n", lab, cs.worst_norm,
               cs.worst_name, RTOL);
        rp_model_free(m);
    }
    free(tokens);
    free(targets);
    free(mask);
    fixture_free(&f);
}

/* ---- main ---------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    uint32_t one = 1;
    unsigned char lsb;
    memcpy(&lsb, &one, 1);
    if (!CHECK(lsb == 1, "the fixture format is little-endian; this host is not"))
        return check_summary("test_fixtures");

    const char *dir = getenv("ROPER_FIXTURES");
    if (!dir || !*dir) dir = "tests/fixtures";
    char *names[256];
    int n = 0;
    DIR *d = opendir(dir);
    if (!CHECK(d != NULL, "fixture directory %s exists (run from the repo root or set "
                          "ROPER_FIXTURES)", dir))
        return check_summary("test_fixtures");
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && n < 256) {
        size_t len = strlen(ent->d_name);
        if (len > 5 && strcmp(ent->d_name + len - 5, ".rpfx") == 0) {
            names[n] = malloc(len - 4);
            memcpy(names[n], ent->d_name, len - 5);
            names[n][len - 5] = 0;
            n++;
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    printf("fixtures in %s: %d; tolerance |err| <= %.0e * max|ref| per tensor\n", dir, n, RTOL);

    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++) {
        int found = 0;
        for (int i = 0; i < n; i++) found |= strcmp(names[i], required[r]) == 0;
        CHECK(found, "fixture %s/%s.rpfx is present", dir, required[r]);
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.rpfx", dir, names[i]);
        run_fixture(path, names[i]);
        free(names[i]);
    }
    return check_summary("test_fixtures");
}

/* bench_out.c -- print `snapbank bench` results (bench_out.h). */
#include "bench_out.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define MIB 1048576.0
#define GIB 1073741824.0

static const double PCTS[] = { 1, 5, 10, 20, 50, 80, 90, 95, 99, 99.9 };
#define N_PCTS (sizeof PCTS / sizeof *PCTS)

/* The hourly budget in effect (the store's default when the job says 0). */
static uint64_t budget_of(const bj_job *j)
{
    if (j->write_budget)
        return j->write_budget;
    sb_config c;
    sb_config_default(&c);
    return c.write_budget_bytes_per_hour;
}

/* Store-clock hours the job covered (at least one). */
static size_t hours_of(const br_result *r)
{
    size_t h = (size_t)ceil(r->sim_hours);
    if (h < 1)
        h = 1;
    return h < r->n_hours ? h : r->n_hours;
}

typedef struct wear {
    double per_day;            /* host bytes per (store-clock) day */
    double dwpd, tb_year;
} wear;

static wear wear_of(const bj_job *j, const br_result *r)
{
    wear w = { 0 };
    double h = r->sim_hours > 1e-9 ? r->sim_hours : 1e-9;
    w.per_day = (double)r->stats.disk_write_bytes / h * 24;
    w.dwpd = j->drive_capacity ? w.per_day / (double)j->drive_capacity : 0;
    w.tb_year = w.per_day * 365 / 1e12;
    return w;
}

static double side_bw(const br_side *s, double secs)
{
    return secs > 0 ? (double)s->bytes / secs : 0;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

double bo_ratio(const br_result *r)
{
    if (r->secs <= 0)
        return -1;
    if (r->fio_write > 0)
        return (double)r->stats.disk_write_bytes / r->secs / r->fio_write;
    if (r->fio_read > 0)
        return (double)r->stats.disk_read_bytes / r->secs / r->fio_read;
    return -1;
}

/* ---- normal ------------------------------------------------------------------- */

static void normal_side(FILE *f, const char *name, br_side *s, double secs)
{
    if (!s->ops)
        return;
    double bw = side_bw(s, secs);
    fprintf(f, "  %s: IOPS=%.1f, BW=%.1fMiB/s (%.1fMB/s)(%.1fMiB/%.2fs)\n", name,
            (double)s->ops / secs, bw / MIB, bw / 1e6, (double)s->bytes / MIB, secs);
    double sum = 0;
    for (size_t i = 0; i < s->lat.n; i++)
        sum += (double)s->lat.ns[i];
    fprintf(f, "    clat (usec): min=%.1f, max=%.1f, avg=%.1f\n",
            (double)bl_percentile(&s->lat, 0) / 1e3, (double)bl_percentile(&s->lat, 100) / 1e3,
            s->lat.n ? sum / (double)s->lat.n / 1e3 : 0);
    fprintf(f, "    clat percentiles (usec):");
    for (size_t i = 0; i < N_PCTS; i++)
        fprintf(f, "%s %.2fth=[%.0f]", i ? "," : "", PCTS[i],
                (double)bl_percentile(&s->lat, PCTS[i]) / 1e3);
    fprintf(f, "\n");
}

static void normal_job(FILE *f, const bj_job *j, br_result *r)
{
    const sb_stats *s = &r->stats;
    char loop[32] = "";
    if (r->loops > 1)
        snprintf(loop, sizeof loop, " loop %u of %u", r->loop, r->loops);
    fprintf(f, "%s%s: (rw=%s, iodepth=%" PRIu64 ", threads=%" PRIu64 ", page %" PRIu64 " x %" PRIu64
               " B, compression %" PRIu64 ")%s%s\n",
            j->name, loop, bj_rw_name(j->rw), j->iodepth, j->threads, j->page_tokens,
            j->bytes_per_token, j->compression, *j->description ? " " : "", j->description);
    normal_side(f, "write", &r->write, r->secs);
    normal_side(f, "read", &r->read, r->secs);
    fprintf(f, "  device: wrote %.1f MiB (%.1f MiB/s), read %.1f MiB (%.1f MiB/s) in %.2f s"
               " (%.2f store-clock hours)\n",
            (double)s->disk_write_bytes / MIB, (double)s->disk_write_bytes / MIB / r->secs,
            (double)s->disk_read_bytes / MIB, (double)s->disk_read_bytes / MIB / r->secs,
            r->secs, r->sim_hours);
    double lg = s->disk_logical_bytes ? (double)s->disk_logical_bytes : 1;
    fprintf(f, "  wear: host %.3f GiB, logical %.3f GiB, WA %.3f (heads %.3f, padding %.3f, "
               "summaries %.3f, superblock %.3f, namespaces %.3f, reinsert %.3f, compression "
               "-%.3f)\n",
            (double)s->disk_write_bytes / GIB, (double)s->disk_logical_bytes / GIB,
            s->disk_write_amplification, (double)s->disk_head_bytes / lg,
            (double)s->disk_padding_bytes / lg, (double)s->disk_summary_bytes / lg,
            (double)s->disk_superblock_bytes / lg, (double)s->disk_ns_record_bytes / lg,
            (double)s->disk_reinsert_bytes / lg, (double)s->disk_compress_saved_bytes / lg);
    uint64_t budget = budget_of(j);
    size_t nh = hours_of(r);
    fprintf(f, "        budget %.1f MiB/h; written per store-clock hour (x budget):",
            (double)budget / MIB);
    for (size_t h = 0; h < nh; h++)
        fprintf(f, "%s %.3f", h % 12 || !h ? "" : "\n         ",
                (double)r->hour_bytes[h] / (double)budget);
    fprintf(f, "\n        denied blocks:");
    bool any = false;
    for (int i = 0; i < SB_DENY__COUNT; i++)
        if (s->disk_denials[i]) {
            fprintf(f, " %s %" PRIu64 " (%.1f MiB)", sb_deny_name(i), s->disk_denials[i],
                    (double)s->disk_denied_bytes[i] / MIB);
            any = true;
        }
    fprintf(f, "%s; %" PRIu64 " waited in the pool, %" PRIu64 " written from it\n",
            any ? "" : " none", s->disk_deferred, s->disk_pool_written);
    wear w = wear_of(j, r);
    fprintf(f, "        projected: %.3f drive writes per day on a %.0f GiB drive, %.2f TB "
               "written per year\n",
            w.dwpd, (double)j->drive_capacity / GIB, w.tb_year);
    const br_durability *d = &r->dur;
    if (d->puts)
        fprintf(f, "  durability (%s): %" PRIu64 " puts: %" PRIu64 " durable when they returned, %"
                   PRIu64 " pending, %" PRIu64 " never (a block denied); blocks queued %" PRIu64
                   ", written %" PRIu64 ", deferred %" PRIu64 ", dirty %" PRIu64 ", denied %"
                   PRIu64 "\n",
                bj_durability_name(j->durability), d->puts, d->durable, d->pending, d->never,
                d->queued, d->written, d->deferred, d->dirty, d->denied);
    if (r->decode_alone > 0)
        fprintf(f, "  decode (%s model, %" PRIu64 " threads, foreground marks %s): %.1f tokens/s "
                   "alone, %.1f during the job (%.3f); step p50 %.0f us, p99 %.0f us\n",
                j->decode, j->decode_threads, j->foreground ? "on" : "off", r->decode_alone,
                r->decode_during, r->decode_during / r->decode_alone,
                (double)bl_percentile(&r->decode_lat, 50) / 1e3,
                (double)bl_percentile(&r->decode_lat, 99) / 1e3);
    if (r->fio_write > 0 || r->fio_read > 0) {
        bool wr = r->fio_write > 0;
        double fio = wr ? r->fio_write : r->fio_read;
        fprintf(f, "  fio %s: %.1f MiB/s (same directory, io_uring, direct, a page record per "
                   "I/O); snapbank/fio %.3f\n    %s\n",
                wr ? "write" : "read", fio / MIB, bo_ratio(r), r->fio_cmd[wr ? 0 : 1]);
    }
    if (r->loops > 1 && r->ratio_median > 0)
        fprintf(f, "  snapbank/fio over %u loops: median %.3f (%.3f-%.3f)\n", r->loops,
                r->ratio_median, r->ratio_min, r->ratio_max);
    fprintf(f, "\n");
}

/* ---- json --------------------------------------------------------------------- */

static void json_side(FILE *f, const char *name, br_side *s, double secs)
{
    double sum = 0;
    for (size_t i = 0; i < s->lat.n; i++)
        sum += (double)s->lat.ns[i];
    fprintf(f,
            "      \"%s\": {\"io_bytes\": %" PRIu64 ", \"bw_bytes\": %.0f, \"iops\": %.3f, "
            "\"total_ios\": %" PRIu64 ", \"runtime\": %.0f,\n"
            "        \"clat_ns\": {\"min\": %" PRIu64 ", \"max\": %" PRIu64 ", \"mean\": %.1f, "
            "\"percentile\": {",
            name, s->bytes, side_bw(s, secs), secs > 0 ? (double)s->ops / secs : 0, s->ops,
            secs * 1000, bl_percentile(&s->lat, 0), bl_percentile(&s->lat, 100),
            s->lat.n ? sum / (double)s->lat.n : 0);
    for (size_t i = 0; i < N_PCTS; i++)
        fprintf(f, "%s\"%f\": %" PRIu64, i ? ", " : "", PCTS[i], bl_percentile(&s->lat, PCTS[i]));
    fprintf(f, "}}}");
}

static void json_job(FILE *f, const bj_job *j, br_result *r)
{
    const sb_stats *s = &r->stats;
    fprintf(f, "    {\"jobname\": ");
    json_str(f, j->name);
    fprintf(f, ", \"description\": ");
    json_str(f, j->description);
    fprintf(f, ", \"rw\": \"%s\", \"loop\": %u, \"loops\": %u, \"elapsed\": %.3f, "
               "\"store_clock_hours\": %.4f,\n",
            bj_rw_name(j->rw), r->loop, r->loops, r->secs, r->sim_hours);
    json_side(f, "write", &r->write, r->secs);
    fprintf(f, ",\n");
    json_side(f, "read", &r->read, r->secs);
    fprintf(f, ",\n");
    uint64_t budget = budget_of(j);
    wear w = wear_of(j, r);
    fprintf(f,
            "      \"wear\": {\"host_bytes_written\": %" PRIu64 ", \"host_bytes_read\": %" PRIu64
            ", \"logical_bytes\": %" PRIu64 ", \"write_amplification\": %.4f,\n"
            "        \"breakdown\": {\"heads\": %" PRIu64 ", \"padding\": %" PRIu64
            ", \"summaries\": %" PRIu64 ", \"superblock\": %" PRIu64 ", \"namespaces\": %" PRIu64
            ", \"reinsert\": %" PRIu64 ", \"compression_saved\": %" PRIu64 "},\n"
            "        \"budget_bytes_per_hour\": %" PRIu64 ", \"bytes_per_hour\": [",
            s->disk_write_bytes, s->disk_read_bytes, s->disk_logical_bytes,
            s->disk_write_amplification, s->disk_head_bytes, s->disk_padding_bytes,
            s->disk_summary_bytes, s->disk_superblock_bytes, s->disk_ns_record_bytes,
            s->disk_reinsert_bytes, s->disk_compress_saved_bytes, budget);
    size_t nh = hours_of(r);
    for (size_t h = 0; h < nh; h++)
        fprintf(f, "%s%" PRIu64, h ? ", " : "", r->hour_bytes[h]);
    fprintf(f, "], \"demand_bytes_per_hour\": [");
    for (size_t h = 0; h < nh; h++)
        fprintf(f, "%s%.0f", h ? ", " : "", r->hour_demand[h]);
    fprintf(f, "],\n        \"denied_blocks\": {");
    for (int i = 0; i < SB_DENY__COUNT; i++)
        fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", sb_deny_name(i), s->disk_denials[i]);
    fprintf(f, "}, \"denied_bytes\": {");
    for (int i = 0; i < SB_DENY__COUNT; i++)
        fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", sb_deny_name(i), s->disk_denied_bytes[i]);
    fprintf(f, "}, \"deferred_blocks\": %" PRIu64 ", \"pool_written_blocks\": %" PRIu64
               ",\n        \"drive_capacity\": %" PRIu64 ", \"drive_writes_per_day\": %.4f, "
               "\"tb_written_per_year\": %.3f},\n",
            s->disk_deferred, s->disk_pool_written, j->drive_capacity, w.dwpd, w.tb_year);
    const br_durability *d = &r->dur;
    fprintf(f, "      \"durability\": {\"mode\": \"%s\", \"puts\": %" PRIu64 ", \"durable\": %" PRIu64
               ", \"pending\": %" PRIu64 ", \"never\": %" PRIu64 ", \"blocks_queued\": %" PRIu64
               ", \"blocks_written\": %" PRIu64 ", \"blocks_deferred\": %" PRIu64
               ", \"blocks_dirty\": %" PRIu64 ", \"blocks_denied\": %" PRIu64 "},\n",
            bj_durability_name(j->durability), d->puts, d->durable, d->pending, d->never,
            d->queued, d->written, d->deferred, d->dirty, d->denied);
    if (r->decode_alone > 0)
        fprintf(f, "      \"decode\": {\"model\": \"%s\", \"tokens_per_s_alone\": %.3f, "
                   "\"tokens_per_s_during\": %.3f, \"step_p50_ns\": %" PRIu64
                   ", \"step_p99_ns\": %" PRIu64 ", \"foreground\": %s},\n",
                j->decode, r->decode_alone, r->decode_during,
                bl_percentile(&r->decode_lat, 50), bl_percentile(&r->decode_lat, 99),
                j->foreground ? "true" : "false");
    fprintf(f, "      \"fio\": {\"write_bw_bytes\": %.0f, \"read_bw_bytes\": %.0f, "
               "\"write_iops\": %.1f, \"read_iops\": %.1f, \"snapbank_over_fio\": %.4f, "
               "\"ratio_median\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f}}",
            r->fio_write, r->fio_read, r->fio_write > 0 ? r->fio_write_iops : -1,
            r->fio_read > 0 ? r->fio_read_iops : -1, bo_ratio(r), r->ratio_median, r->ratio_min,
            r->ratio_max);
}

/* ---- terse -------------------------------------------------------------------- */

static void terse_job(FILE *f, const bj_job *j, br_result *r)
{
    const sb_stats *s = &r->stats;
    br_side *sides[2] = { &r->write, &r->read };
    fprintf(f, "snapbank;1;%s;%s", j->name, bj_rw_name(j->rw));
    for (int k = 0; k < 2; k++)
        fprintf(f, ";%" PRIu64 ";%.0f;%.3f;%" PRIu64 ";%" PRIu64, sides[k]->bytes,
                side_bw(sides[k], r->secs), r->secs > 0 ? (double)sides[k]->ops / r->secs : 0,
                bl_percentile(&sides[k]->lat, 50), bl_percentile(&sides[k]->lat, 99));
    fprintf(f, ";%" PRIu64 ";%" PRIu64 ";%.4f;%.4f;%.0f;%.0f\n", s->disk_write_bytes,
            s->disk_logical_bytes, s->disk_write_amplification, wear_of(j, r).dwpd,
            r->fio_write, r->fio_read);
}

void bo_begin(FILE *f, bo_format fmt)
{
    if (fmt == BO_JSON) {
        unsigned v = sb_version();
        fprintf(f, "{\n  \"snapbank version\": \"%u.%u.%u\",\n  \"jobs\": [\n", v / 10000,
                v / 100 % 100, v % 100);
    }
}

void bo_job(FILE *f, bo_format fmt, const bj_job *j, br_result *r, bool first)
{
    if (fmt == BO_NORMAL)
        normal_job(f, j, r);
    else if (fmt == BO_TERSE)
        terse_job(f, j, r);
    else {
        if (!first)
            fprintf(f, ",\n");
        json_job(f, j, r);
    }
    fflush(f);
}

void bo_end(FILE *f, bo_format fmt)
{
    if (fmt == BO_JSON)
        fprintf(f, "\n  ]\n}\n");
}

/* ---- csv ---------------------------------------------------------------------- */

static FILE *csv_open(const char *dir, const char *job, const char *suffix)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s%s.csv", dir, job, suffix);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "snapbank bench: cannot write %s\n", path);
    return f;
}

int bo_csv(const char *dir, const bj_job *j, br_result *r)
{
    FILE *f = csv_open(dir, j->name, "");
    if (!f)
        return -1;
    fprintf(f, "t_s,store_clock_h,host_bytes,write_bytes,read_bytes\n");
    for (size_t i = 0; i < r->n_series; i++) {
        const br_sample *p = &r->series[i];
        fprintf(f, "%.3f,%.5f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", p->t, p->sim_h,
                p->host_bytes, p->write_bytes, p->read_bytes);
    }
    int rc = fclose(f) ? -1 : 0;
    if (!(f = csv_open(dir, j->name, "_hours")))
        return -1;
    fprintf(f, "hour,host_bytes,budget_bytes,demand_bytes\n");
    for (size_t h = 0; h < hours_of(r); h++)
        fprintf(f, "%zu,%" PRIu64 ",%" PRIu64 ",%.0f\n", h, r->hour_bytes[h], budget_of(j),
                r->hour_demand[h]);
    rc |= fclose(f) ? -1 : 0;
    if (!(f = csv_open(dir, j->name, "_clat")))
        return -1;
    fprintf(f, "percentile,write_ns,read_ns\n");
    for (int p = 0; p <= 1000; p++)
        fprintf(f, "%.1f,%" PRIu64 ",%" PRIu64 "\n", p / 10.0,
                bl_percentile(&r->write.lat, p / 10.0), bl_percentile(&r->read.lat, p / 10.0));
    rc |= fclose(f) ? -1 : 0;
    return rc;
}

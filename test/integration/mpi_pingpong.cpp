/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* A two-rank MPI ping-pong with every byte verified, for Open MPI over libfabric
 * (mpirun --mca pml cm --mca mtl ofi). Rank 0 sends a pattern, rank 1 checks it and returns it
 * transformed, rank 0 checks the answer. Prints one line per size (bytes, iterations, usec per
 * round trip / 2) and exits non-zero at the first wrong byte.
 *
 *   mpi_pingpong [MAX_SIZE [ITERS [SLEEP_S]]]
 *
 * SLEEP_S: after the ping-pong every rank prints "rank R pid P sleeping S s" and sleeps that
 * long outside MPI (connections open, no MPI call), then meets the others in a barrier: what
 * a progress thread costs while the application does not call MPI. With MPI_PINGPONG_PID_DIR
 * set, each rank also writes its pid to DIR/rankR.pid when it starts sleeping. */
#define OMPI_SKIP_MPICXX 1 /* the C API only: Open MPI's C++ bindings do not build warning-free */
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace
{

unsigned char pattern(size_t i, int iter, int side)
{
	return static_cast<unsigned char>(
	    (i * 131u + static_cast<unsigned>(iter) * 7u + static_cast<unsigned>(side)) & 0xffu);
}

bool check(const std::vector<unsigned char> &buf, size_t len, int iter, int side, int rank)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(i, iter, side)) {
			fprintf(stderr,
			        "rank %d: size %zu iteration %d: byte %zu is 0x%02x, expected "
			        "0x%02x\n",
			        rank, len, iter, i, buf[i], pattern(i, iter, side));
			return false;
		}
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank = 0, size = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "run with exactly 2 ranks (got %d)\n", size);
		MPI_Finalize();
		return 2;
	}
	const size_t max_size = argc > 1 ? strtoull(argv[1], nullptr, 0) : (1u << 20);
	const int iters = argc > 2 ? atoi(argv[2]) : 20;
	const int sleep_s = argc > 3 ? atoi(argv[3]) : 0;
	std::vector<unsigned char> buf(max_size ? max_size : 1);
	int ok = 1;
	for (size_t len = 0; len <= max_size && ok; len = len ? len * 4 : 1) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int it = 0; it < iters && ok; it++) {
			const int count = static_cast<int>(len);
			if (rank == 0) {
				for (size_t i = 0; i < len; i++)
					buf[i] = pattern(i, it, 0);
				MPI_Send(buf.data(), count, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				memset(buf.data(), 0, len);
				MPI_Recv(buf.data(), count, MPI_BYTE, 1, it, MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
				ok = check(buf, len, it, 1, rank);
			} else {
				MPI_Recv(buf.data(), count, MPI_BYTE, 0, it, MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
				ok = check(buf, len, it, 0, rank);
				for (size_t i = 0; i < len; i++)
					buf[i] = pattern(i, it, 1);
				MPI_Send(buf.data(), count, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
		double usec = (MPI_Wtime() - t0) * 1e6 / iters / 2;
		int all_ok = 0;
		MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
		ok = all_ok;
		if (rank == 0 && ok)
			printf("%10zu bytes %5d iterations %10.2f usec one-way, verified\n", len,
			       iters, usec);
		if (len == max_size)
			break;
		if (len * 4 > max_size && len != max_size)
			len = max_size / 4; /* end with max_size itself */
	}
	if (rank == 0)
		printf("mpi_pingpong: %s\n", ok ? "all data verified" : "DATA MISMATCH");
	if (sleep_s > 0) {
		printf("rank %d pid %d sleeping %d s\n", rank, static_cast<int>(getpid()), sleep_s);
		fflush(stdout);
		/* mpirun forwards that line late on a slow machine: a driver that times the sleep
		 * reads MPI_PINGPONG_PID_DIR/rankR.pid instead */
		if (const char *dir = getenv("MPI_PINGPONG_PID_DIR")) {
			std::string path =
			    std::string(dir) + "/rank" + std::to_string(rank) + ".pid";
			if (FILE *f = fopen(path.c_str(), "w")) {
				fprintf(f, "%d\n", static_cast<int>(getpid()));
				fclose(f);
			}
		}
		sleep(static_cast<unsigned>(sleep_s));
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return ok ? 0 : 1;
}

/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Shared by the libFuzzer targets of test/fuzz (built by configure --enable-fuzz, clang only). */
#ifndef VWAIT_FUZZ_COMMON_H
#define VWAIT_FUZZ_COMMON_H

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace vwait_fuzz
{

/* The provider the util objects of a target log through. */
inline struct fi_provider fuzz_prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .name = "vwait-fuzz",
};

/* Bytes of a length the input picks (up to max), as a buffer that owns exactly them: ASan
 * sees any read past its end. */
inline std::vector<uint8_t> bytes(FuzzedDataProvider &in, size_t max)
{
	return in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, max));
}

/* A value that is often one of the interesting ones, else anything. */
template <typename T>
T pick(FuzzedDataProvider &in, std::initializer_list<const T> usual)
{
	if (in.ConsumeBool())
		return in.PickValueInArray(usual);
	return in.ConsumeIntegral<T>();
}

/* A string, or NULL. */
struct opt_string {
	bool null = true;
	std::string s;
	const char *c_str() const { return null ? nullptr : s.c_str(); }
	char *dup() const { return null ? nullptr : strdup(s.c_str()); }
};
inline opt_string string_or_null(FuzzedDataProvider &in, size_t max)
{
	opt_string o;
	o.null = in.ConsumeBool();
	if (!o.null)
		o.s = in.ConsumeRandomLengthString(max);
	return o;
}

} // namespace vwait_fuzz

/* FI_WARN lines would drown the fuzzer's own output; FUZZ_LOG=1 keeps them. Defined here, not
 * inline: each fuzz target is one file that includes this header once, and libFuzzer looks
 * for the symbol. */
extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	if (!getenv("FUZZ_LOG"))
		setenv("FI_LOG_LEVEL", "none", 1);
	return 0;
}

#endif

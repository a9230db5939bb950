/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* util::cpu_relax: a hint to the core that this thread spins (lets a sibling hyperthread run),
 * on the architectures that have one; nothing elsewhere. */
#ifndef VWAIT_UTIL_CPU_RELAX_H
#define VWAIT_UTIL_CPU_RELAX_H

namespace vwait::util
{

inline void cpu_relax() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	asm volatile("yield" ::: "memory");
#endif
}

} // namespace vwait::util

#endif

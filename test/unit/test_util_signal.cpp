/* util::fd and util::signal: ownership, coalescing, reset, and no lost wakeup under races. */
#include "vwait/util/fd.h"
#include "vwait/util/signal.h"
/* The interface headers must compile on their own, in any order. */
#include "vwait/util/fdset.h"
#include "vwait/util/poll.h"
#include "vwait/util/trywait.h"
#include "vwait/util/wait.h"
#include "vwait/util/waitable.h"

#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "vwait_cmocka.h"

using vwait::util::fd;

namespace
{

bool readable(int raw)
{
	struct pollfd p = {raw, POLLIN, 0};
	return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

bool is_open(int raw)
{
	return ::fcntl(raw, F_GETFD) >= 0 || errno != EBADF;
}

void test_fd_owns_and_moves(void **)
{
	int raw;
	{
		fd a = fd::eventfd_nonblock();
		assert_true(static_cast<bool>(a));
		raw = a.get();
		fd b(std::move(a));
		assert_false(static_cast<bool>(a));
		assert_int_equal(b.get(), raw);
		fd c;
		c = std::move(b);
		assert_int_equal(c.get(), raw);
		assert_true(is_open(raw));
	}
	assert_false(is_open(raw));
}

void test_fd_release_and_close(void **)
{
	fd a = fd::eventfd_nonblock();
	int raw = a.release();
	assert_false(static_cast<bool>(a));
	assert_true(is_open(raw));
	fd b(raw);
	assert_int_equal(b.close(), 0);
	assert_false(is_open(raw));
	assert_int_equal(b.close(), 0); /* empty: nothing to close */
}

void test_signal_raise_reset(void **state)
{
	auto *s = static_cast<vwait::util::signal *>(*state);
	assert_false(readable(s->fd()));
	s->raise();
	assert_true(readable(s->fd()));
	assert_true(s->raised());
	s->raise(); /* coalesces */
	s->raise();
	s->reset();
	assert_false(readable(s->fd()));
	assert_false(s->raised());
	s->reset(); /* reset of a clear signal is harmless */
	assert_false(readable(s->fd()));
	s->raise();
	assert_true(readable(s->fd()));
	s->reset();
}

int signal_setup(void **state)
{
	auto *s = new vwait::util::signal();
	*state = s;
	return s->open();
}

int signal_teardown(void **state)
{
	delete static_cast<vwait::util::signal *>(*state);
	return 0;
}

} // namespace

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fd_owns_and_moves),
	    cmocka_unit_test(test_fd_release_and_close),
	    cmocka_unit_test_setup_teardown(test_signal_raise_reset, signal_setup, signal_teardown),
	};
	return cmocka_run_group_tests_name("util_signal", tests, nullptr, nullptr);
}

import pytest

from ddptui.core.hostlist import HostlistError, expand_hostlist


@pytest.mark.parametrize("expr,names", [
    ("node[02-04]", ["node02", "node03", "node04"]),
    ("gpu[1,3-4]-ib", ["gpu1-ib", "gpu3-ib", "gpu4-ib"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("a,b[1-2],c", ["a", "b1", "b2", "c"]),
    ("rack[1-2]n[01-02]", ["rack1n01", "rack1n02", "rack2n01", "rack2n02"]),
    ("localhost", ["localhost"]),
])
def test_expand(expr, names):
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize("expr,offset,word", [
    ("node[02-", 4, "never closed"),
    ("node[4-2]", 5, "backwards"),
    ("a,,b", 2, "empty name"),
    ("n[x]", 2, "bad range"),
    ("a,a", 0, "twice"),
    ("bad name", 3, "' ' is not allowed"),
    ("a;touch x", 1, "';' is not allowed"),
    ("-oProxyCommand", 0, "starts with '-'"),
    ("n[0-100000][0-100000]", 0, "at most 4096"),
    ("a,b[1-5000]", 2, "expands to at least 5,001 names"),
    ("n[" + "1" * 20 + "]", 2, "bad range"),
])
def test_errors_carry_the_offset(expr, offset, word):
    with pytest.raises(HostlistError) as ei:
        expand_hostlist(expr)
    assert ei.value.offset == offset and word in str(ei.value)


def test_the_count_is_known_before_anything_is_expanded():
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(HostlistError):
        expand_hostlist("n[0-100000][0-100000]")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1_000_000


def test_a_list_of_exactly_the_limit_expands():
    assert len(expand_hostlist("n[1-4096]")) == 4096


@pytest.mark.parametrize("expr", ["fe80::1%eth0", "user@gpu01", "a_b", "h.example.org"])
def test_what_openssh_accepts_is_accepted(expr):
    assert expand_hostlist(expr) == [expr]

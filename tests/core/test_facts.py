"""Parsers on real recorded output (tests/data/corpus, copied from users' public issues)."""

from __future__ import annotations

import json

import pytest

from ddptui.core.checks import facts as F
from ddptui.core.checks.predict import decided_by, gloo_interface, matches, nccl_interface, predicted_transport
from tests.conftest import DATA

SMI = DATA / "corpus" / "nvidia-smi"


def body(name: str) -> str:
    """The recorded output without its `# ` header (the header is the test's answer, not input)."""
    text = (SMI / name).read_text()
    return "\n".join(l for l in text.splitlines() if not l.startswith("# ") and not l.startswith("$"))


def test_nvidia_smi_table_r550_layout():
    t = F.parse_nvidia_smi_table(body("01-table-v100-driver-580.txt"))
    assert (t.driver, t.cuda) == ("580.126.09", "13.0")
    assert [(g.index, g.name, g.memory_used_mib, g.memory_total_mib) for g in t.gpus] == [
        (0, "Tesla V100-SXM2-16GB", 5, 16384), (1, "Tesla V100-SXM2-16GB", 5, 16384)]


def test_nvidia_smi_csv_with_header_and_units():
    gpus = F.parse_nvidia_smi_csv(body("07-query-gpu-csv-a10-loop.txt"))
    assert len(gpus) == 5  # a -lms loop: five samples of one GPU
    assert {g.memory_total_mib for g in gpus} == {23028} and gpus[0].memory_used_mib == 21


def test_nvidia_smi_csv_noheader_nounits():
    gpus = F.parse_nvidia_smi_csv("0, NVIDIA A100-SXM4-80GB, 81920, 3, 535.104.05\n1, NVIDIA A100-SXM4-80GB, 81920, 0, 535.104.05\n")
    assert [(g.index, g.name, g.memory_total_mib, g.driver) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-80GB", 81920, "535.104.05"), (1, "NVIDIA A100-SXM4-80GB", 81920, "535.104.05")]


IP_ADDR = json.dumps([
    {"ifname": "lo", "flags": ["LOOPBACK", "UP"], "operstate": "UNKNOWN", "link_type": "loopback",
     "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifname": "docker0", "flags": ["UP"], "operstate": "UP", "link_type": "ether",
     "addr_info": [{"family": "inet", "local": "172.17.0.1", "prefixlen": 16}]},
    {"ifname": "eth0", "flags": ["UP"], "operstate": "UP", "link_type": "ether",
     "addr_info": [{"family": "inet", "local": "10.0.0.2", "prefixlen": 24}]},
    {"ifname": "ib0", "flags": ["UP"], "operstate": "UP", "link_type": "infiniband",
     "addr_info": [{"family": "inet", "local": "192.168.10.2", "prefixlen": 24}]},
    {"ifname": "eth1", "flags": ["BROADCAST"], "operstate": "DOWN", "link_type": "ether", "addr_info": []},
])


def test_ip_addr_kinds_and_order():
    ifs = F.parse_ip_addr(IP_ADDR)
    assert [(i.name, i.kind, i.up) for i in ifs] == [("lo", "loopback", True), ("docker0", "docker", True),
                                                     ("eth0", "ethernet", True), ("ib0", "infiniband", True),
                                                     ("eth1", "ethernet", False)]


@pytest.mark.parametrize("env,expected", [
    ({}, "ib0"),  # NCCL prefers ib*
    ({"NCCL_SOCKET_IFNAME": "eth"}, "eth0"),  # a prefix
    ({"NCCL_SOCKET_IFNAME": "^ib,docker"}, "lo"),  # exclusions, in interface order: lo comes first
    ({"NCCL_SOCKET_IFNAME": "^ib,docker,lo"}, "eth0"),
    ({"NCCL_SOCKET_IFNAME": "=eth"}, None),  # exact: no interface is called "eth"
    ({"NCCL_SOCKET_IFNAME": "=eth0"}, "eth0"),
    ({"NCCL_SOCKET_IFNAME": "eth1"}, None),  # eth1 is down
])
def test_nccl_interface_rules(env, expected):
    assert nccl_interface(F.parse_ip_addr(IP_ADDR), env)[0] == expected


def test_an_interface_whose_every_ipv4_address_is_link_local():
    assert F.Interface("usb0", ("169.254.3.1/16", "fe80::1/64"), True).link_local
    assert not F.Interface("eth0", ("10.0.0.2/24", "169.254.3.1/16"), True).link_local  # one routes
    assert not F.Interface("ens5", ("fe80::1/64",), True).link_local  # no IPv4: NCCL binds its fe80:: (below)


def test_nccl_takes_an_interface_with_ipv6_alone_after_every_one_with_ipv4():
    """NCCL takes an interface at its first address, IPv4 or IPv6 (it skips only ::1), and getifaddrs
    lists every IPv4 address before any IPv6 one (healthy corpus 304: `[0]ens5:172.31.92.218<0>
    [1]vethe2e6725:fe80::...`). An IPoIB port given no address still has its fe80::, and NCCL, which
    prefers ib*, bootstraps on it (NVIDIA/nccl#1291: `Bootstrap : Using ib0:fe80::a288:c203:d2:aaf2%ib0`
    on one GH200, bond0 on the other; it hung). Between nodes that is an error: the families never meet."""
    from ddptui.core.checks import judge

    ib = F.Interface("ib0", ("fe80::a288:c203:d2:aaf2/64",), True, "infiniband")
    eth = F.Interface("eth0", ("10.0.0.2/24", "fe80::1/64"), True)
    lo = F.Interface("lo", ("127.0.0.1/8", "::1/128"), True, "loopback")
    veth = F.Interface("veth1", ("fe80::2/64",), True, "virtual")
    assert nccl_interface([lo, eth, ib], {}) == ("ib0", "NCCL prefers ib* interfaces (IPv6 alone: fe80::a288:c203:d2:aaf2)")
    assert nccl_interface([lo, veth, eth], {}) == ("eth0", "the first interface that is not docker or lo")
    assert nccl_interface([lo, veth], {})[0] == "veth1"  # nothing with IPv4 but lo: lo comes last
    assert nccl_interface([lo, eth, ib], {"NCCL_SOCKET_FAMILY": "AF_INET"})[0] == "eth0"
    assert nccl_interface([lo, eth, ib], {"NCCL_SOCKET_IFNAME": "eth"})[0] == "eth0"
    assert nccl_interface([lo, eth], {"NCCL_SOCKET_FAMILY": "AF_INET6"}) == (
        "eth0", "the first interface that is not docker or lo (IPv6 by NCCL_SOCKET_FAMILY: fe80::1)")
    assert nccl_interface([F.Interface("lo", ("::1/128",), True, "loopback")], {}) == (None, "no interface is up with an address")

    def node(chosen, ifs, route="eth0"):
        return F.NodeFacts(interfaces=ifs, nccl_interface=chosen, route_to_master={"interface": route},
                           evidence={"nccl-interface": ("", nccl_interface(ifs, {})[1])})

    gh1, gh2 = node("ib0", [lo, eth, ib]), node("eth0", [lo, eth])
    (f,) = judge.cross_node({"gh1": gh1, "gh2": gh2}, {"gh1": 1, "gh2": 1}, "nccl")
    assert (f.id, f.severity, f.nodes) == ("wrong-interface", "error", ["gh1", "gh2"])
    assert f.summary == ("NCCL would bootstrap over IPv6 on gh1 (ib0 fe80::a288:c203:d2:aaf2) and over IPv4 on gh2: "
                         "the two families never connect")
    assert f.fix.per_node == {"gh1": {"NCCL_SOCKET_IFNAME": "eth0"}}
    assert f.evidence[0].text == "NCCL prefers ib* interfaces (IPv6 alone: fe80::a288:c203:d2:aaf2) → ib0"
    assert judge.cross_node({"gh1": gh1, "gh3": node("ib0", [lo, eth, ib])}, {"gh1": 1, "gh3": 1}, "nccl") == []
    assert judge.cross_node({"gh1": gh1, "gh2": gh2}, {"gh1": 1, "gh2": 1}, "gloo") == []
    six = F.NodeFacts(interfaces=[lo, eth], nccl_interface="eth0", env={"NCCL_SOCKET_FAMILY": "AF_INET6"},
                      route_to_master={"interface": "eth0"})  # eth0 has IPv4, but the family is set: IPv6
    (g,) = judge.cross_node({"gh2": gh2, "gh4": six}, {"gh2": 1, "gh4": 1}, "nccl")
    assert g.summary.startswith("NCCL would bootstrap over IPv6 on gh4 (eth0 fe80::1) and over IPv4 on gh2")
    assert g.fix.scope == "manual" and "gh4 set NCCL_SOCKET_FAMILY=AF_INET6: remove it there" in g.fix.explain
    (w,) = judge.interfaces("gh1", gh1, "nccl", True)  # on its own: the route goes elsewhere, a warning
    assert w.severity == "warning" and w.summary == (
        "gh1: NCCL would use ib0 (IPv6 alone: fe80::a288:c203:d2:aaf2), but the master is reached through eth0")


def test_nccl_skips_docker_and_lo_without_ib():
    ifs = [i for i in F.parse_ip_addr(IP_ADDR) if i.name != "ib0"]
    assert nccl_interface(ifs, {})[0] == "eth0"
    assert nccl_interface([i for i in ifs if i.name in ("lo", "docker0")], {})[0] == "docker0"


def test_gloo_interface():
    ifs = F.parse_ip_addr(IP_ADDR)
    assert gloo_interface(ifs, {}, ["10.0.0.2"])[0] == "eth0"
    assert gloo_interface(ifs, {}, ["127.0.1.1"])[0] == "lo"
    assert gloo_interface(ifs, {"GLOO_SOCKET_IFNAME": "ib0"}, ["127.0.1.1"])[0] == "ib0"
    assert gloo_interface(ifs, {"GLOO_SOCKET_IFNAME": "ib9"}, ["10.0.0.2"])[0] is None


def test_predicted_transport():
    active = [F.IBPort("mlx5_0", 1, "ACTIVE", "InfiniBand")]
    down = [F.IBPort("mlx5_0", 1, "DOWN", "InfiniBand")]
    assert predicted_transport(active, {})[0] == "IB"
    assert predicted_transport(active, {"NCCL_IB_DISABLE": "1"}) == ("Socket", "NCCL_IB_DISABLE=1")
    assert predicted_transport(active, {"NCCL_IB_HCA": "mlx5_1"})[0] == "Socket"
    assert predicted_transport(active, {"NCCL_IB_HCA": "=mlx5_0:1"})[0] == "IB"
    assert predicted_transport(active, {"NCCL_NET": "Socket"})[0] == "Socket"
    assert predicted_transport(down, {}) == ("Socket", "no InfiniBand/RoCE port is ACTIVE")
    assert predicted_transport([], {}) == ("Socket", "no InfiniBand/RoCE device")
    assert [decided_by(predicted_transport(active, env)[1]) for env in ({}, {"NCCL_IB_DISABLE": "1"}, {"NCCL_IB_HCA": "mlx5_1"})] == [
        None, "NCCL_IB_DISABLE", "NCCL_IB_HCA"]
    roce = [F.IBPort("mlx5_0", 1, "ACTIVE", "Ethernet")]
    assert "RoCE" in predicted_transport(roce, {})[1]


def test_matches():
    assert matches("mlx5_0", "mlx5") and not matches("mlx5_0", "^mlx5") and matches("mlx4_0", "^mlx5")
    assert matches("mlx5_0:1", "mlx5_0:1") and not matches("mlx5_10", "=mlx5_1")


def test_ibv_devinfo_and_sysfs():
    text = (DATA / "doubles" / "ib-active" / "ibv_devinfo").read_text().split("cat <<'OUT'\n")[1].split("OUT")[0]
    assert F.parse_ibv_devinfo(text) == [F.IBPort("mlx5_0", 1, "ACTIVE", "InfiniBand")]
    assert F.parse_ib_sysfs("mlx5_0 1 4: ACTIVE InfiniBand\nmlx5_1 1 1: DOWN Ethernet\n") == [
        F.IBPort("mlx5_0", 1, "ACTIVE", "InfiniBand"), F.IBPort("mlx5_1", 1, "DOWN", "Ethernet")]


def test_small_parsers():
    assert F.parse_getent("127.0.1.1       STREAM node03\n127.0.1.1       DGRAM\n10.0.0.3 RAW\n") == ["127.0.1.1", "10.0.0.3"]
    assert F.parse_shm("Filesystem 1024-blocks Used Available Capacity Mounted on\nshm 65536 0 65536 0% /dev/shm\n") == 64
    assert F.parse_shm_free("Filesystem 1024-blocks Used Available Capacity Mounted on\nshm 65536 1024 64512 2% /dev/shm\n") == 63
    assert F.parse_shm("df: /dev/shm: No such file or directory\n") is None and F.parse_shm_free("") is None
    assert F.parse_env("NCCL_DEBUG=INFO\nPATH=/bin\nGLOO_SOCKET_IFNAME=eth0\n") == {"NCCL_DEBUG": "INFO", "GLOO_SOCKET_IFNAME": "eth0"}
    assert F.parse_route('[{"dst":"10.0.0.2","dev":"eth0","prefsrc":"10.0.0.3"}]') == {
        "interface": "eth0", "source": "10.0.0.3", "type": "unicast", "gateway": None}


def test_the_env_section_keeps_only_what_the_env_fact_is_for() -> None:
    from ddptui.core.checks.facts import env_lines

    text = "HOME=/root\nAWS_SECRET_ACCESS_KEY=abc123\nNCCL_DEBUG=INFO\nMULTI=a\nNCCL_FAKE=continued\nOMP_NUM_THREADS=1\n"
    assert env_lines(text).splitlines() == ["NCCL_DEBUG=INFO", "NCCL_FAKE=continued", "OMP_NUM_THREADS=1"]


def test_the_process_holding_a_port_is_read_from_ss():
    from ddptui.core.checks.portcheck import port_holder

    line = 'LISTEN 0 128 0.0.0.0:29500 0.0.0.0:* users:(("python3",pid=4242,fd=3))'
    assert port_holder(line) == ("python3", 4242)
    assert port_holder("LISTEN 0 128 0.0.0.0:29500 0.0.0.0:*") is None and port_holder(None) is None


def fabric_of(name: str) -> list[F.Fabric]:
    """What the probe's own `fabric` command (nvidia-smi -q through its awk) keeps of a recorded -q."""
    kept = kept_by_probe(name)
    # the GPU lines, Fabric, Retired Pages and Remapped Rows blocks only
    assert len(kept.splitlines()) <= 14 * max(1, body(name).count("\nGPU "))
    return F.parse_fabric(kept)


def kept_by_probe(name: str) -> str:
    """What the probe's `fabric` command (nvidia-smi -q through its awk) keeps of a recorded -q."""
    import subprocess

    from ddptui.core.checks.probe import probe_commands

    cmd = dict(probe_commands(None, 29500, True, False))["fabric"]
    assert cmd.startswith("nvidia-smi -q | ")
    return subprocess.run(["sh", "-c", cmd.split(" | ", 1)[1]], input=body(name), capture_output=True, text=True,
                          check=True).stdout


def test_nvswitch_fabric_of_a_ready_hgx_node():
    fabric = fabric_of("08-q-8xh100-hgx-fabric-completed.txt")
    assert [f.gpu for f in fabric][:2] == ["00000000:19:00.0", "00000000:3B:00.0"] and len(fabric) == 8
    assert all(f.applies and f.ready and (f.state, f.status) == ("Completed", "Success") for f in fabric)


def test_nvswitch_fabric_not_set_up_or_failed():
    (stuck,) = fabric_of("09-q-fabric-in-progress-gpu-operator-2511.txt")
    assert (stuck.gpu, stuck.state, stuck.status) == ("?", "In Progress", "N/A") and stuck.applies and not stuck.ready
    (failed,) = fabric_of("10-q-fabric-completed-insufficient-resources-azhpc-506.txt")
    assert (failed.state, failed.status) == ("Completed", "Insufficient Resources") and not failed.ready


def test_a_pcie_gpu_has_no_fabric_to_judge():
    (a10,) = fabric_of("11-q-a10-pcie-fabric-na.txt")
    assert (a10.gpu, a10.state, a10.status) == ("00000000:07:00.0", "N/A", "N/A") and not a10.applies
    assert F.parse_fabric("sh: 1: nvidia-smi: not found\nnvidia-smi test double: unsupported arguments: -q") == []


def test_the_fabric_verdict_fails_an_nccl_job_and_warns_a_gloo_one():
    from ddptui.core.checks import judge

    ready = F.NodeFacts(fabric=fabric_of("08-q-8xh100-hgx-fabric-completed.txt"))
    assert judge.fabric("hgx1", ready, "nccl") == ("pass", "NVSwitch fabric ready on 8 GPUs (State Completed, Status Success)", [])
    assert judge.fabric("a10", F.NodeFacts(fabric=fabric_of("11-q-a10-pcie-fabric-na.txt")), "nccl") is None
    failed = F.NodeFacts(fabric=fabric_of("10-q-fabric-completed-insufficient-resources-azhpc-506.txt"))
    status, summary, (f,) = judge.fabric("hgx2", failed, "nccl")
    assert status == "fail" and "error 802" in summary and "Status Insufficient Resources" in summary
    assert (f.id, f.severity, f.nodes) == ("fabric-manager-down", "error", ["hgx2"])
    assert f.evidence[0].text == "State Completed, Status Insufficient Resources"
    status, _, (f,) = judge.fabric("hgx2", failed, "gloo")
    assert (status, f.severity) == ("warn", "warning")


# `df -Pk /dev/shm` on this machine in a mount namespace whose /dev/shm is a 3 GiB tmpfs that two files a
# crashed job might leave fill (unshare --mount; mount -t tmpfs -o size=3g; fallocate -l 3000M nccl-Ewjreo,
# 40M psm_shm.0a7b): llm-d/llm-d#352's pod, whose 3 GB /dev/shm the crashes before had filled
SHM_FULL = ("Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
            "tmpfs              3145728 3112960     32768      99% /dev/shm\n")
SHM_DOCKER = ("Filesystem     1024-blocks  Used Available Capacity Mounted on\n"
              "shm                  65536     0     65536   0% /dev/shm\n")
SHM_ROOMY = ("Filesystem     1024-blocks  Used Available Capacity Mounted on\n"
             "tmpfs             24683784     0  24683784       0% /dev/shm\n")


def test_the_shm_verdict_warns_where_dev_shm_is_too_small_or_full():
    from ddptui.core.checks import judge

    def verdict(out: str, nproc: int = 2):
        nf = F.NodeFacts(shm_mib=F.parse_shm(out), shm_free_mib=F.parse_shm_free(out),
                         evidence={"shm": ("df -Pk /dev/shm", out)})
        return judge.shm("n1", nf, nproc)

    status, summary, (f,) = verdict(SHM_FULL)
    assert (status, summary) == ("warn", "/dev/shm 3072 MiB, 32 MiB free")
    assert (f.id, f.severity, f.summary) == ("shm-too-small", "warning", "n1: /dev/shm has 32 MiB free of 3072 MiB")
    assert f.evidence[0].text.endswith("99% /dev/shm") and "ls -la /dev/shm" in f.fix.explain and not f.fixable
    status, summary, (f,) = verdict(SHM_DOCKER)
    assert (status, summary, f.summary) == ("warn", "/dev/shm 64 MiB", "n1: /dev/shm is 64 MiB")
    assert "--shm-size" in f.fix.explain
    assert verdict(SHM_ROOMY) == ("pass", "/dev/shm 24105 MiB", [])
    assert verdict(SHM_FULL, nproc=1) == ("pass", "/dev/shm 3072 MiB, 32 MiB free", [])  # one process shares nothing
    assert judge.shm("n1", F.NodeFacts(), 2) is None  # df said nothing


IP = DATA / "recorded" / "ip"


def test_ip_addr_text_reads_as_the_json_of_the_same_links() -> None:
    """An old iproute2 (CentOS 7's 3.10) has no `ip -j`: the probe falls back to `ip addr`,
    and its text gives the same interfaces, state and kind (recorded one after the other)."""
    text, js = F.parse_ip_addr((IP / "host-addr.txt").read_text()), F.parse_ip_addr((IP / "host-addr.json").read_text())
    assert text == js and len(js) >= 5
    by = {i.name: i for i in text}
    assert by["lo"] == F.Interface("lo", ("127.0.0.1/8", "::1/128"), True, "loopback")
    assert by["eth0"].ipv4() == ["192.0.2.2"] and by["eth0"].up and not by["ifb0"].up
    assert "ddpt-node02" in by  # a veth end, "ddpt-node02@if2" in the text


def test_ip_route_get_text_reads_as_its_json() -> None:
    blocks = (IP / "route-get.txt").read_text().split("$ ")[1:]
    outputs = {b.split("\n", 1)[0]: b.split("\n", 1)[1] for b in blocks}
    for addr in ("127.0.0.1", "8.8.8.8", "10.213.0.5"):
        assert F.parse_route(outputs[f"ip route get {addr}"]) == F.parse_route(outputs[f"ip -j route get {addr}"])
    assert F.parse_route(outputs["ip route get 127.0.0.1"])["type"] == "local"
    assert F.parse_route(outputs["ip route get 8.8.8.8"]) == {
        "interface": "eth0", "source": "192.0.2.2", "type": "unicast", "gateway": "192.0.2.1"}


def test_a_gpu_whose_rows_wait_for_a_reset_is_read_through_the_probe() -> None:
    """gpud's A10 (Remapped Rows: Uncorrectable Error 4, Pending: Yes) and the A100 of the
    ml-engineering guide after an Xid 63 (Pending: Yes, its author's `[...]` cuts) wait for a reset;
    the 8 x H100 HGX node's GPUs (Pending: No, Failure: No, Retired Pages N/A) are sound."""
    from ddptui.core.checks.gpu_memory import parse_gpu_memory

    (a10,) = parse_gpu_memory(kept_by_probe("11-q-a10-pcie-fabric-na.txt"))
    assert (a10.gpu, a10.remap_pending, a10.remap_failed, a10.retire_pending) == ("00000000:07:00.0", True, False, False)
    assert a10.fault == "rows wait for a GPU reset to be remapped" and a10.line == "Remapped Rows: Pending: Yes"
    (a100,) = parse_gpu_memory(kept_by_probe("12-q-a100-remap-pending-after-xid63-ml-engineering.txt"))
    assert (a100.gpu, a100.remap_pending) == ("00000000:10:1C.0", True)
    hgx = parse_gpu_memory(kept_by_probe("08-q-8xh100-hgx-fabric-completed.txt"))
    assert len(hgx) == 8 and not any(m.fault for m in hgx)
    assert parse_gpu_memory(body("11-q-a10-pcie-fabric-na.txt")) == [a10]  # the whole -q reads the same
    # check --json's facts: each GPU's flags where nvidia-smi -q had the blocks, no key where it had none
    assert F.NodeFacts(gpu_memory=[a10]).to_json()["gpu_memory"] == [
        {"gpu": "00000000:07:00.0", "remap_pending": True, "remap_failed": False, "retire_pending": False}]
    assert "gpu_memory" not in F.NodeFacts().to_json()


def test_the_gpu_memory_verdict_warns_for_a_reset_and_fails_a_lost_or_spent_gpu() -> None:
    from ddptui.core.checks.gpu_memory import GpuMemory, judge, parse_gpu_memory

    smi = "nvidia-smi --query-gpu=..."
    assert judge("hgx1", parse_gpu_memory(kept_by_probe("08-q-8xh100-hgx-fabric-completed.txt")), "", "q", smi) == ("", [])
    words, (f,) = judge("a10", parse_gpu_memory(kept_by_probe("11-q-a10-pcie-fabric-na.txt")), "", "nvidia-smi -q | awk", smi)
    assert words == "GPU 00000000:07:00.0: rows wait for a GPU reset to be remapped"
    assert (f.id, f.severity, f.nodes) == ("gpu-hardware-fault", "warning", ["a10"])
    assert (f.evidence[0].text, f.evidence[0].command) == ("GPU 00000000:07:00.0: Remapped Rows: Pending: Yes",
                                                           "nvidia-smi -q | awk")
    # a GPU out of spare rows: its rows also wait, and the failure is what is said, with its line
    (spent,) = parse_gpu_memory("GPU 00000000:07:00.0\n    Remapped Rows\n        Pending : Yes\n"
                                "        Remapping Failure Occurred : Yes\n")
    assert spent.remap_pending and spent.remap_failed
    words, (f,) = judge("a10", [spent], "", "q", smi)
    assert f.severity == "error" and words == "GPU 00000000:07:00.0: a row remapping failed (no spare row left)"
    assert f.evidence[0].text == "GPU 00000000:07:00.0: Remapped Rows: Remapping Failure Occurred: Yes"
    pages = GpuMemory("?", retire_pending=True, line="Retired Pages: Pending Page Blacklist: Yes")
    words, (f,) = judge("v100", [pages], "", "q", smi)
    assert f.severity == "warning" and words == "pages wait for a GPU reset to be retired"
    assert f.evidence[0].text == "Retired Pages: Pending Page Blacklist: Yes"
    # nvidia-smi's own words for a GPU it lost (rwth-i6/returnn#1486, corpus 332), whatever -q said
    lost = next(x for x in (DATA / "corpus" / "nccl" / "332-gpu-hardware-fault-nvidia-smi-lost-gpu-returnn.log")
                .read_text().splitlines() if x.startswith("Unable to determine"))
    words, (f,) = judge("cn-234", [], lost + "\n", "q", smi)
    assert f.severity == "error" and f.evidence[0].text == lost and f.evidence[0].command == smi
    assert words == f"nvidia-smi cannot reach a GPU ({lost})"


def test_the_locked_memory_limit_and_cap_ipc_lock_read_and_judged():
    """`ulimit -l` and CapEff as the probe prints them (recorded on the test cluster: lowlock's session
    under Docker's 64 KiB without CAP_IPC_LOCK; node02's root session, this host's 8192 KiB with it)."""
    from ddptui.core.checks import memlock

    low = memlock.parse("64\nCapEff:\t000001fffeffbfff\n")
    root = memlock.parse("8192\nCapEff:\t000001fffeffffff\n")
    assert low == {"limit_kib": 64, "ipc_lock": False} and root == {"limit_kib": 8192, "ipc_lock": True}
    assert memlock.parse("unlimited\n") == {"limit_kib": None, "ipc_lock": None}
    assert memlock.parse("sh: ulimit: bad option\n") is None and memlock.parse("") is None
    ev = {"memlock": ("ulimit -l; grep '^CapEff:' /proc/self/status", "64\nCapEff:\t000001fffeffbfff")}

    def judge(limit, transport, backend):
        return memlock.judge("n1", F.NodeFacts(memlock=limit, predicted_transport=transport, evidence=ev), backend)

    status, summary, (f,) = judge(low, "IB", "nccl")
    assert (status, summary, f.id, f.severity) == ("warn", "locked memory 64 KiB: NET/IB pins more", "memlock-too-low", "warning")
    assert f.evidence[0].text == "ulimit -l: 64, no CAP_IPC_LOCK"
    assert judge(low, "Socket", "nccl") == ("pass", "locked memory 64 KiB", [])  # nothing to pin
    assert judge(low, "IB", "gloo")[2] == []
    assert judge(root, "IB", "nccl") == ("pass", "locked memory 8 MiB (CAP_IPC_LOCK: not counted)", [])
    assert judge({"limit_kib": 2 << 20, "ipc_lock": False}, "IB", "nccl")[0] == "pass"  # a site's choice
    assert judge(None, "IB", "nccl") is None


# /proc/driver/nvidia/version's first line, as users pasted it: the proprietary modules of a datacenter
# driver (aws/aws-parallelcluster#4127: ParallelCluster compute nodes, g4dn's T4, Ubuntu 20.04), and the
# open ones, NVIDIA's default since R560 (nix-community/nixGL#186: Ubuntu 24.04, nvidia-driver-565-open)
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.103.01  Thu Jan  6 12:10:04 UTC 2022"
OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@U16-A24-9-2)  "
        "Thu Oct 10 12:15:00 UTC 2024")


def test_gpudirect_rdma_read_as_nccl_looks_for_it_and_judged():
    """The probe prints each of NCCL's peer-memory files found, `uname -r`, the driver's banner. Neither
    the module nor DMA-BUF (open modules, Linux 5.12+) on a node NCCL will use NET/IB from: a warning;
    with either, or where NET/Socket carries the job, none; the banner unread: not known."""
    from ddptui.core.checks import gpudirect as G

    prop = G.parse(f"kernel 5.15.0-1019-aws\n{PROPRIETARY}\n")
    assert prop == {"peermem": None, "kernel": "5.15.0-1019-aws", "driver": "470.103.01", "open": False}
    opened = G.parse(f"kernel 6.8.0-49-generic\n{OPEN}\n")
    assert opened == {"peermem": None, "kernel": "6.8.0-49-generic", "driver": "565.57.01", "open": True}
    loaded = G.parse(f"peermem /sys/module/nvidia_peermem/version\nkernel 5.15.0-1019-aws\n{PROPRIETARY}\n")
    assert loaded["peermem"] == "/sys/module/nvidia_peermem/version"
    assert G.parse("") is None and G.parse("sh: uname: not found\n") is None
    gpus = [F.GPU(0, "Tesla T4", 15360, 0, "470.103.01")]

    def judge(g, transport="IB", backend="nccl", gpus=gpus, nccl=None):
        out = "\n".join(["kernel x", PROPRIETARY])
        nf = F.NodeFacts(gpudirect=g, gpus=gpus, predicted_transport=transport, evidence={"gpudirect": (G.COMMAND, out)},
                         software={"nccl": nccl})
        return G.judge("n1", nf, backend)

    status, summary, (f,) = judge(prop)
    assert (status, f.id, f.severity) == ("warn", "gpudirect-rdma-missing", "warning")
    assert summary == "no GPUDirect RDMA: no peer-memory module, no DMA-BUF (proprietary kernel modules): NET/IB through host memory"
    assert f.evidence[0].text == PROPRIETARY and f.evidence[0].command == G.COMMAND and "modprobe nvidia-peermem" in f.fix.explain
    assert judge(loaded) == ("pass", "GPUDirect RDMA: nvidia_peermem loaded", [])
    assert judge(opened) == ("pass", "GPUDirect RDMA: DMA-BUF possible (open kernel modules 565.57.01, Linux 6.8.0-49-generic)", [])
    old = judge({**opened, "kernel": "5.4.0-150-generic"})  # the open modules, but a kernel without RDMA DMA-BUF
    assert old[0] == "warn" and "Linux 5.4.0-150-generic is older than 5.12" in old[1]
    assert judge(prop, transport="Socket")[0:2] == ("pass", "no GPUDirect RDMA: no peer-memory module, no DMA-BUF "
                                                     "(proprietary kernel modules); NET/Socket does not use it")
    assert judge(prop, backend="gloo")[0:2] == ("pass", "no GPUDirect RDMA: no peer-memory module, no DMA-BUF "
                                                 "(proprietary kernel modules); gloo does not use it")
    assert judge({**prop, "driver": None, "open": None})[0] == "skip"  # no banner: nothing concluded
    assert judge(prop, gpus=[]) is None and judge(None) is None  # no GPU: no row
    # nvidia_peermem alone, and the job's NCCL older than 2.23.4, which looks only at MLNX_OFED's
    # /sys/kernel/mm/memory_peers (NVIDIA/nccl#1676: DGX OS 25.01's upgrade, ~180 -> ~10 GB/s)
    status, summary, (f,) = judge(loaded, nccl="2.21.5")
    assert status == "warn" and summary.startswith("nvidia_peermem is loaded, but the job's NCCL 2.21.5 looks only")
    assert "NCCL 2.23.4 or later" in f.fix.explain and f.fix.scope == "manual"
    assert f.evidence[0].text == "peermem /sys/module/nvidia_peermem/version; the job's NCCL 2.21.5"
    assert judge(loaded, nccl="2.23.4")[0:2] == judge(loaded, nccl="2.27.3")[0:2] == ("pass", "GPUDirect RDMA: nvidia_peermem loaded")
    assert judge({**opened, "peermem": loaded["peermem"]}, nccl="2.21.5")[0] == "pass"  # DMA-BUF needs no module
    ofed = {**loaded, "peermem": "/sys/kernel/mm/memory_peers/nv_mem/version"}  # where every NCCL looks
    assert judge(ofed, nccl="2.18.3") == ("pass", "GPUDirect RDMA: a peer-memory module loaded", [])
    assert G.nccl_version("2.21.5") == (2, 21, 5) and G.nccl_version(None) is None and G.nccl_version("?") is None

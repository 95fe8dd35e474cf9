"""Byte sizes as the benchmark tables and plots name them (shared by the plot scripts)."""

KIB, MIB = 1 << 10, 1 << 20


def size_name(b):
    if b >= MIB and b % MIB == 0:
        return f"{b // MIB} MiB"
    if b >= KIB and b % KIB == 0:
        return f"{b // KIB} KiB"
    return f"{b} B"

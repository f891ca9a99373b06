# What creating the tier's files costs on this disk (BENCHMARKS.md t14-hot): 800 objects in
# 256 subfolders of DIR, each as the tier writes a small object: MODE data (the data file,
# 40 KB written), map (the sidecar, O_EXCL, 72 bytes), both, or create2 (both files, no data).
# Prints the kernel (sys) and user CPU per object. On ext4 without a journal, run it right
# after removing many files and again 30 s later: the first pays ext4's recently_deleted scan.
# Usage: python3 scripts/tier-epoch1/create-cost.py DIR data|map|both|create2
import os, sys, time, resource
d=sys.argv[1]; mode=sys.argv[2]; N=800
for i in range(256): os.makedirs(f"{d}/{i:02x}", exist_ok=True)
buf=b"x"*40000; hdr=b"h"*72
r0=resource.getrusage(resource.RUSAGE_SELF); t0=time.time()
for i in range(N):
    name=f"{d}/{i%256:02x}/{os.urandom(32).hex()}"
    if mode in ("data","both","create2"):
        fd=os.open(name, os.O_RDWR|os.O_CREAT|os.O_CLOEXEC, 0o644)
        if mode!="create2": os.pwrite(fd, buf, 0)
        os.close(fd)
    if mode in ("both","create2","map"):
        fd=os.open(name+".map", os.O_RDWR|os.O_CREAT|os.O_EXCL|os.O_CLOEXEC, 0o644)
        os.pwrite(fd, hdr, 0); os.close(fd)
r1=resource.getrusage(resource.RUSAGE_SELF)
print(f"{mode}: {(r1.ru_stime-r0.ru_stime)/N*1e6:.0f} us sys, {(r1.ru_utime-r0.ru_utime)/N*1e6:.0f} us user per object, {(time.time()-t0)*1000:.0f} ms")

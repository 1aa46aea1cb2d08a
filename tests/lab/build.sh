# Sourced by lab.sh: build-ramdisk and build-image.

# The newest kernel in /boot whose modules are installed (Debian's generic linux-image-amd64:
# it has 9p, which the cloud kernel lacks).
pick_kernel() {
    local k kver=""
    for k in /boot/vmlinuz-*; do
        [ -d "/lib/modules/${k#/boot/vmlinuz-}/kernel" ] && kver="${k#/boot/vmlinuz-}"
    done
    [ -n "$kver" ] || fail "no /boot/vmlinuz-* with its /lib/modules (apt-get install linux-image-amd64)"
    echo "$kver"
}

# Copies MODULES (and what they depend on, in load order) into ROOT/lib/modules, flat, with
# ROOT/lib/modules/load-order listing them.
copy_modules() { # ROOT KVER MODULES...
    local root="$1" kver="$2" m line ko
    shift 2
    mkdir -p "$root/lib/modules"
    : >"$root/lib/modules/load-order"
    for m in "$@"; do
        modprobe -S "$kver" --show-depends "$m" >"$root/deps" || fail "no module $m for $kver"
        while read -r line; do
            case "$line" in
                insmod\ *) ko="$(echo "$line" | cut -d' ' -f2)" ;;
                *) continue ;;  # "builtin x"
            esac
            grep -qx "${ko##*/}" "$root/lib/modules/load-order" && continue
            case "$ko" in
                *.ko) cp "$ko" "$root/lib/modules/" ;;
                *.ko.xz) xz -dc "$ko" >"$root/lib/modules/$(basename "$ko" .xz)"; ko="${ko%.xz}" ;;
                *) fail "unexpected module file $ko" ;;
            esac
            echo "${ko##*/}" >>"$root/lib/modules/load-order"
        done <"$root/deps"
        rm -f "$root/deps"
    done
}

build_ramdisk() {
    local out="${1:-}"
    [ -n "$out" ] || fail "build-ramdisk OUTDIR"
    require_tools
    [ -x "$IPA_VENV/bin/ironic-python-agent" ] \
        || fail "no agent venv at $IPA_VENV: run tests/peers/ipa-sandbox.sh setup first"
    local t0 kver root
    t0="$(clock)"
    kver="$(pick_kernel)"
    mkdir -p "$out"
    root="$(mktemp -d /tmp/ferrum-lab-initramfs.XXXXXX)"
    mkdir -p "$root"/{bin,etc,lib,proc,sys,dev,root,tmp}
    cp /bin/busybox "$root/bin/busybox"
    # ipmi_devintf and ipmi_si (after ipmi_msghandler): /dev/ipmi0 on the VM's KCS interface,
    # where the agent's `ipmitool lan print` reads the BMC's address (its inventory's
    # bmc_address).
    copy_modules "$root" "$kver" virtio_pci virtio_net virtio_blk 9pnet_virtio 9p overlay \
        efivarfs button evdev ipmi_devintf ipmi_si
    cp "$HERE/ramdisk-init.sh" "$root/init"
    chmod 755 "$root/init"
    printf 'IPA_VENV=%s\nKVER=%s\n' "$IPA_VENV" "$kver" >"$root/etc/ramdisk.env"
    # The /etc the agent's root gets (copied there by /init): no host secrets, only what
    # programs look up.
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
    : >"$root/etc/resolv.conf"
    ln -s ../proc/self/mounts "$root/etc/mtab"
    # Debian's awk (and others) are /etc/alternatives links: the agent runs `ipmitool lan print
    # 1 | awk ...` for the BMC's address, which is "awk: not found" without them. Links only.
    cp -a /etc/alternatives "$root/etc/alternatives"
    ln -s ../usr/lib/os-release "$root/etc/os-release"
    cp /etc/ld.so.cache "$root/etc/ld.so.cache"
    # ipmitool reads the whole IANA enterprise-number registry (4.7 MB) at every start, 0.3-0.5 s
    # on TCG, and the agent runs it 13 times for its BMC's addresses: the agent's HOME gets a
    # registry of the two entries the lab needs (0, and 4753, the manufacturer in bmc.emu), which
    # ipmitool reads first (~/.local/usr/share/misc). It only names manufacturers.
    awk '/^[0-9]+$/ { seen = 1; keep = ($1 == 0 || $1 == 4753) } !seen || keep' \
        /usr/share/misc/enterprise-numbers.txt >"$root/etc/enterprise-numbers.txt"
    cat >"$root/etc/udhcpc.script" <<'EOF'
#!/bin/sh
# busybox udhcpc's hook: configure the lease.
case "$1" in
    deconfig) ip addr flush dev "$interface"; ip link set "$interface" up ;;
    bound|renew)
        ip addr flush dev "$interface"
        ip addr add "$ip/${mask:-24}" dev "$interface"
        [ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface"
        : >/etc/resolv.conf
        for d in $dns; do echo "nameserver $d" >>/etc/resolv.conf; done
        echo "ferrum-lab-ramdisk: lease $ip/$mask on $interface from ${serverid:-?}"
        ;;
esac
EOF
    chmod 755 "$root/etc/udhcpc.script"
    (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$out/initramfs"
    rm -rf "$root"
    cp "/boot/vmlinuz-$kver" "$out/vmlinuz"
    say "ramdisk in $out: vmlinuz ($kver, $(du -h "$out/vmlinuz" | cut -f1)), initramfs" \
        "($(du -h "$out/initramfs" | cut -f1)); the agent comes from $IPA_VENV over 9p;" \
        "built in $(since "$t0") s"
}

# A whole-disk instance image: MBR, one FAT partition holding syslinux (BIOS: mbr.bin and
# ldlinux.sys; UEFI: \EFI\BOOT\BOOTX64.EFI, syslinux.efi), Debian's kernel and an initramfs
# whose /init prints FERRUM-LAB-INSTANCE-BOOTED and the host name from the config drive.
# Built without loop devices or mounts. OUTFILE ending in .raw: raw, else qcow2.
build_image() {
    local out="${1:-}"
    [ -n "$out" ] || fail "build-image OUTFILE"
    require_tools
    [ -r /usr/lib/syslinux/mbr/mbr.bin ] || fail "no /usr/lib/syslinux/mbr/mbr.bin (syslinux-common)"
    [ -r /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ] || fail "no syslinux.efi (apt-get install syslinux-efi)"
    local t0 kver work root part_mib=40 start=2048
    t0="$(clock)"
    kver="$(pick_kernel)"
    work="$(mktemp -d /tmp/ferrum-lab-image.XXXXXX)"
    root="$work/initramfs"
    mkdir -p "$root"/{bin,etc,lib,proc,sys,dev,mnt,tmp}
    cp /bin/busybox "$root/bin/busybox"
    copy_modules "$root" "$kver" virtio_pci virtio_blk isofs button evdev
    cp "$HERE/instance-init.sh" "$root/init"
    chmod 755 "$root/init"
    (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -9) >"$work/initrd"
    cp "/boot/vmlinuz-$kver" "$work/vmlinuz"
    cat >"$work/syslinux.cfg" <<'CFG'
DEFAULT instance
PROMPT 0
TIMEOUT 0
LABEL instance
    KERNEL /vmlinuz
    APPEND initrd=/initrd console=tty0 console=ttyS0,115200 quiet
CFG
    # The FAT file system, then the disk around it.
    mkfs.fat -C -n FERRUMLAB "$work/part.img" $((part_mib * 1024)) >/dev/null
    export MTOOLS_SKIP_CHECK=1
    mcopy -i "$work/part.img" "$work/vmlinuz" "$work/initrd" "$work/syslinux.cfg" ::/
    mmd -i "$work/part.img" ::/EFI ::/EFI/BOOT
    mcopy -i "$work/part.img" /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ::/EFI/BOOT/BOOTX64.EFI
    mcopy -i "$work/part.img" /usr/lib/syslinux/modules/efi64/ldlinux.e64 ::/EFI/BOOT/
    mcopy -i "$work/part.img" "$work/syslinux.cfg" ::/EFI/BOOT/syslinux.cfg
    syslinux --install "$work/part.img"
    truncate -s $(( (start * 512) + (part_mib << 20) + (1 << 20) )) "$work/disk.raw"
    # One bootable partition, type 0xef (EFI system: OVMF looks there; SeaBIOS boots the MBR).
    printf 'label: dos\nstart=%d, size=%d, type=ef, bootable\n' "$start" $(( part_mib * 2048 )) \
        | sfdisk -q "$work/disk.raw"
    dd if=/usr/lib/syslinux/mbr/mbr.bin of="$work/disk.raw" bs=440 count=1 conv=notrunc \
        status=none
    dd if="$work/part.img" of="$work/disk.raw" bs=512 seek="$start" conv=notrunc status=none
    mkdir -p "$(dirname "$out")"
    case "$out" in
        *.raw) mv "$work/disk.raw" "$out" ;;
        *) qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$out" ;;
    esac
    rm -rf "$work"
    say "instance image $out ($(du -h "$out" | cut -f1), kernel $kver) in $(since "$t0") s"
    echo "sha256 $(sha256sum "$out" | cut -d' ' -f1) $out"
}

# An EFI system partition image (FAT) holding GRUB as \EFI\BOOT\BOOTX64.EFI: the `bootloader`
# of the UEFI boot ISOs a conductor builds for virtual media (Ironic's ESP image). GRUB's
# embedded configuration finds the CD holding EFI/BOOT/grub.cfg (Ironic's grub_config_path)
# and reads it; the conductor writes that file.
build_esp() {
    local out="${1:-}"
    [ -n "$out" ] || fail "build-esp OUTFILE"
    require_tools
    local t0 work
    t0="$(clock)"
    work="$(mktemp -d /tmp/ferrum-lab-esp.XXXXXX)"
    cat >"$work/grub.cfg" <<'CFG'
search --no-floppy --set=root --file /EFI/BOOT/grub.cfg
configfile ($root)/EFI/BOOT/grub.cfg
CFG
    # Only the modules that boot a kernel from a CD, built in (the prefix stays GRUB's memdisk,
    # which holds no others): ~1 MB, not GRUB's ~10. Without a module for a file system, a
    # search only skips that disk.
    local modules="normal linux iso9660 fat part_gpt part_msdos search search_fs_file
        configfile echo test all_video"
    # shellcheck disable=SC2086 # the list is words
    grub-mkstandalone -O x86_64-efi -o "$work/BOOTX64.EFI" --locales= --fonts= --themes= \
        --install-modules="$modules" --modules="$(echo $modules)" \
        "boot/grub/grub.cfg=$work/grub.cfg"
    mkfs.fat -C "$work/esp.img" 8192 >/dev/null
    export MTOOLS_SKIP_CHECK=1
    mmd -i "$work/esp.img" ::/EFI ::/EFI/BOOT
    mcopy -i "$work/esp.img" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
    mkdir -p "$(dirname "$out")"
    mv "$work/esp.img" "$out"
    rm -rf "$work"
    say "EFI system partition $out (GRUB $(du -h "$out" | cut -f1)) in $(since "$t0") s"
}

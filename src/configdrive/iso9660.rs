//! A small ISO 9660 image writer: config drives (in memory) and the boot ISOs of virtual media
//! (streamed to a file, bootable by El Torito).
//!
//! openstacksdk's `openstack/baremetal/configdrive.py` (`pack`) runs `genisoimage`,
//! `mkisofs` or `xorrisofs` with `-J -r -V config-2`, as Ironic runs `mkisofs` for its boot
//! ISOs; none is installed where Ferrum runs, so this writes the image itself. The layout
//! (ECMA-119, 2048-byte sectors):
//!
//! - sectors 0..16: the system area, zeros;
//! - sector 16: the Primary Volume Descriptor;
//! - a bootable image only: sector 17, El Torito's Boot Record (where the boot catalog is);
//! - then a Joliet Supplementary Volume Descriptor (escape sequence `%/E`, UCS-2 level 3),
//!   whose hierarchy keeps the names as given (`meta_data.json`, `2012-08-10`): Linux,
//!   cloud-init and GRUB read long names from Joliet when Rock Ridge is absent;
//! - the Volume Descriptor Set Terminator;
//! - a bootable image only: the boot catalog (one entry, no emulation);
//! - the L (little-endian) and M (big-endian) path tables of the primary hierarchy, then
//!   those of the Joliet hierarchy;
//! - the directory extents of the primary hierarchy, then those of the Joliet hierarchy;
//! - the file extents, shared by both hierarchies.
//!
//! The primary hierarchy uses d-character names (uppercased, other characters as `_`,
//! `;1` after file names; ISOLINUX reads these, ignoring case and the version). There is no
//! Rock Ridge (no `NM`/`PX` entries): readers that prefer Rock Ridge fall back to Joliet here.

use std::{collections::BTreeMap, path::Path};

const SECTOR: usize = 2048;

#[derive(Default)]
struct TreeDir {
    dirs: BTreeMap<String, TreeDir>,
    files: BTreeMap<String, usize>,
}

/// A directory of the tree, flattened: its name in its parent, its parent (the root's is
/// itself), its subdirectories and its files (indices into the `files` argument).
struct Node {
    name: String,
    parent: usize,
    dirs: Vec<usize>,
    files: Vec<(String, usize)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Hier {
    Primary,
    Joliet,
}

enum Entry {
    Dir(usize),
    File(usize),
}

/// One hierarchy's view of the tree: directory numbering (path table order), the sorted
/// entries of each directory, and the directory sizes (whole sectors).
struct Layout {
    order: Vec<usize>,
    number: Vec<usize>,
    entries: Vec<Vec<(Vec<u8>, Entry)>>,
    dir_size: Vec<usize>,
    dir_lba: Vec<usize>,
    pt_size: usize,
    pt_l_lba: usize,
    pt_m_lba: usize,
}

/// A file or directory name in the primary hierarchy: d-characters only (`A-Z`, `0-9`, `_`),
/// files as `NAME.EXT;1` (one dot, kept from the last dot of the name, or added), at most
/// 31 characters as genisoimage's `-l` allows.
fn primary_ident(name: &str, is_dir: bool) -> Vec<u8> {
    let d = |c: char| {
        let c = c.to_ascii_uppercase();
        if c.is_ascii_uppercase() || c.is_ascii_digit() {
            c
        } else {
            '_'
        }
    };
    if is_dir {
        return name
            .chars()
            .map(d)
            .take(31)
            .collect::<String>()
            .into_bytes();
    }
    let (stem, ext) = match name.rfind('.') {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => (name, ""),
    };
    let mut ext: String = ext.chars().map(d).collect();
    ext.truncate(8);
    // 31 characters in all with the dot (the `;1` is not counted).
    let room = 30usize.saturating_sub(ext.len());
    let stem: String = stem.chars().map(d).take(room.max(1)).collect();
    format!("{stem}.{ext};1").into_bytes()
}

/// A name in the Joliet hierarchy: UCS-2 big-endian (characters outside the BMP as `_`),
/// files with `;1` as genisoimage writes them, at most 64 characters.
fn joliet_ident(name: &str, is_dir: bool) -> Vec<u8> {
    let mut s: String = name.chars().take(if is_dir { 64 } else { 62 }).collect();
    if !is_dir {
        s.push_str(";1");
    }
    ucs2(&s)
}

fn ucs2(s: &str) -> Vec<u8> {
    s.chars()
        .flat_map(|c| {
            let u = u16::try_from(u32::from(c)).unwrap_or(u16::from(b'_'));
            u.to_be_bytes()
        })
        .collect()
}

fn ident(h: Hier, name: &str, is_dir: bool) -> Vec<u8> {
    match h {
        Hier::Primary => primary_ident(name, is_dir),
        Hier::Joliet => joliet_ident(name, is_dir),
    }
}

fn both16(v: usize) -> [u8; 4] {
    let v = u16::try_from(v).unwrap_or(u16::MAX);
    let (l, b) = (v.to_le_bytes(), v.to_be_bytes());
    [l[0], l[1], b[0], b[1]]
}

fn both32(v: usize) -> [u8; 8] {
    let v = u32::try_from(v).unwrap_or(u32::MAX);
    let (l, b) = (v.to_le_bytes(), v.to_be_bytes());
    [l[0], l[1], l[2], l[3], b[0], b[1], b[2], b[3]]
}

fn sectors(len: usize) -> usize {
    len.div_ceil(SECTOR)
}

fn record_len(ident_len: usize) -> usize {
    33 + ident_len + (1 - ident_len % 2)
}

/// A directory record: extent, data length, recording date, flags (2 = directory), volume
/// sequence number 1, identifier, and the padding byte after an even-length identifier.
fn dir_record(ident: &[u8], lba: usize, len: usize, is_dir: bool, date: &[u8; 7]) -> Vec<u8> {
    let n = record_len(ident.len());
    let mut r = Vec::with_capacity(n);
    r.push(u8::try_from(n).unwrap_or(u8::MAX));
    r.push(0);
    r.extend_from_slice(&both32(lba));
    r.extend_from_slice(&both32(len));
    r.extend_from_slice(date);
    r.push(if is_dir { 2 } else { 0 });
    r.extend_from_slice(&[0, 0]);
    r.extend_from_slice(&both16(1));
    r.push(u8::try_from(ident.len()).unwrap_or(u8::MAX));
    r.extend_from_slice(ident);
    r.resize(n, 0);
    r
}

/// Places records into sectors: a record never crosses a sector boundary. Returns the
/// directory bytes, padded to whole sectors.
fn pack_records(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let used = out.len() % SECTOR;
        if used + r.len() > SECTOR {
            out.resize(out.len() + SECTOR - used, 0);
        }
        out.extend_from_slice(r);
    }
    out.resize(sectors(out.len().max(1)) * SECTOR, 0);
    out
}

fn flatten(tree: TreeDir) -> Vec<Node> {
    let mut nodes = vec![Node {
        name: String::new(),
        parent: 0,
        dirs: vec![],
        files: vec![],
    }];
    let mut queue = vec![(0usize, tree)];
    while let Some((idx, dir)) = queue.pop() {
        nodes[idx].files = dir.files.into_iter().collect();
        for (name, sub) in dir.dirs {
            let child = nodes.len();
            nodes.push(Node {
                name,
                parent: idx,
                dirs: vec![],
                files: vec![],
            });
            nodes[idx].dirs.push(child);
            queue.push((child, sub));
        }
    }
    nodes
}

fn layout(h: Hier, nodes: &[Node]) -> Layout {
    // Path table order: breadth first, children in identifier order, so that records are
    // sorted by parent number and then by identifier (ECMA-119 9.4).
    let mut order = vec![0];
    let mut i = 0;
    while i < order.len() {
        let mut kids: Vec<usize> = nodes[order[i]].dirs.clone();
        kids.sort_by_key(|&k| ident(h, &nodes[k].name, true));
        order.extend(kids);
        i += 1;
    }
    let mut number = vec![0; nodes.len()];
    for (n, &idx) in order.iter().enumerate() {
        number[idx] = n + 1;
    }
    let mut entries = Vec::with_capacity(nodes.len());
    let mut dir_size = Vec::with_capacity(nodes.len());
    for node in nodes {
        let mut e: Vec<(Vec<u8>, Entry)> = node
            .dirs
            .iter()
            .map(|&d| (ident(h, &nodes[d].name, true), Entry::Dir(d)))
            .chain(
                node.files
                    .iter()
                    .map(|(name, f)| (ident(h, name, false), Entry::File(*f))),
            )
            .collect();
        e.sort_by(|a, b| a.0.cmp(&b.0));
        let mut size = 0;
        for len in [34, 34]
            .into_iter()
            .chain(e.iter().map(|(id, _)| record_len(id.len())))
        {
            let used = size % SECTOR;
            if used + len > SECTOR {
                size += SECTOR - used;
            }
            size += len;
        }
        dir_size.push(sectors(size) * SECTOR);
        entries.push(e);
    }
    let pt_size = order
        .iter()
        .map(|&d| {
            let id_len = if d == 0 {
                1
            } else {
                ident(h, &nodes[d].name, true).len()
            };
            8 + id_len + id_len % 2
        })
        .sum();
    Layout {
        order,
        number,
        entries,
        dir_size,
        dir_lba: vec![0; nodes.len()],
        pt_size,
        pt_l_lba: 0,
        pt_m_lba: 0,
    }
}

fn path_table(h: Hier, nodes: &[Node], l: &Layout, big_endian: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(l.pt_size);
    for &d in &l.order {
        let id = if d == 0 {
            vec![0]
        } else {
            ident(h, &nodes[d].name, true)
        };
        out.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
        out.push(0);
        let lba = u32::try_from(l.dir_lba[d]).unwrap_or(u32::MAX);
        let parent = u16::try_from(l.number[nodes[d].parent]).unwrap_or(u16::MAX);
        if big_endian {
            out.extend_from_slice(&lba.to_be_bytes());
            out.extend_from_slice(&parent.to_be_bytes());
        } else {
            out.extend_from_slice(&lba.to_le_bytes());
            out.extend_from_slice(&parent.to_le_bytes());
        }
        out.extend_from_slice(&id);
        if id.len() % 2 == 1 {
            out.push(0);
        }
    }
    out
}

/// A text field padded with spaces: ASCII for the primary descriptor, UCS-2 big-endian for
/// the Joliet one.
fn text(h: Hier, s: &str, len: usize) -> Vec<u8> {
    let mut v = match h {
        Hier::Primary => s.as_bytes().iter().copied().take(len).collect::<Vec<u8>>(),
        Hier::Joliet => {
            let mut v = ucs2(s);
            v.truncate(len & !1);
            v
        }
    };
    while v.len() < len {
        match h {
            Hier::Primary => v.push(b' '),
            Hier::Joliet if len - v.len() >= 2 => v.extend_from_slice(&[0, b' ']),
            Hier::Joliet => v.push(0),
        }
    }
    v
}

fn volume_descriptor(
    h: Hier,
    label: &str,
    total: usize,
    l: &Layout,
    root_record: &[u8],
    long_date: &[u8; 17],
) -> Vec<u8> {
    let mut d = vec![0u8; SECTOR];
    d[0] = if h == Hier::Primary { 1 } else { 2 };
    d[1..6].copy_from_slice(b"CD001");
    d[6] = 1;
    d[8..40].copy_from_slice(&text(h, "", 32));
    d[40..72].copy_from_slice(&text(h, label, 32));
    d[80..88].copy_from_slice(&both32(total));
    if h == Hier::Joliet {
        d[88..91].copy_from_slice(b"%/E");
    }
    d[120..124].copy_from_slice(&both16(1));
    d[124..128].copy_from_slice(&both16(1));
    d[128..132].copy_from_slice(&both16(SECTOR));
    d[132..140].copy_from_slice(&both32(l.pt_size));
    let l_lba = u32::try_from(l.pt_l_lba).unwrap_or(u32::MAX);
    let m_lba = u32::try_from(l.pt_m_lba).unwrap_or(u32::MAX);
    d[140..144].copy_from_slice(&l_lba.to_le_bytes());
    d[148..152].copy_from_slice(&m_lba.to_be_bytes());
    d[156..190].copy_from_slice(root_record);
    d[190..318].copy_from_slice(&text(h, "", 128));
    d[318..446].copy_from_slice(&text(h, "FERRUM", 128));
    d[446..574].copy_from_slice(&text(h, "", 128));
    d[574..702].copy_from_slice(&text(h, "", 128));
    d[702..739].copy_from_slice(&text(h, "", 37));
    d[739..776].copy_from_slice(&text(h, "", 37));
    d[776..813].copy_from_slice(&text(h, "", 37));
    d[813..830].copy_from_slice(long_date);
    d[830..847].copy_from_slice(long_date);
    d[847..863].copy_from_slice(b"0000000000000000");
    d[864..881].copy_from_slice(long_date);
    d[881] = 1;
    d
}

/// An ISO 9660 image holding `files` (paths like `openstack/latest/meta_data.json`, the
/// directories implied by them) under the volume identifier `volume_label`, which is also
/// the Joliet volume identifier (cloud-init finds a config drive by the label `config-2`).
pub fn image(volume_label: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let listed: Vec<(&str, u64)> = files.iter().map(|(p, d)| (*p, d.len() as u64)).collect();
    let plan = plan(volume_label, &listed, None);
    let mut out = plan.head;
    out.resize(plan.total * SECTOR, 0);
    for (i, (_, data)) in files.iter().enumerate() {
        let at = plan.file_lba[i] * SECTOR;
        out[at..at + data.len()].copy_from_slice(data);
    }
    out
}

/// Where a file of a bootable image comes from.
pub enum Source<'a> {
    Bytes(&'a [u8]),
    /// A file on disk, copied by the kernel (`copy_file_range`): a ramdisk of hundreds of MiB
    /// never passes through memory.
    File(&'a Path),
}

/// What an El Torito boot catalog boots (no emulation), as an index into the files.
#[derive(Debug, Clone, Copy)]
pub enum Boot {
    /// A BIOS boot loader (ISOLINUX's `isolinux.bin`), loaded as 4 virtual sectors, with
    /// the boot information table patched into it (`mkisofs -no-emul-boot -boot-load-size 4
    /// -boot-info-table`). Its source must be `Bytes`.
    Bios(usize),
    /// A FAT image holding the EFI boot loader (an EFI system partition), for UEFI firmware
    /// (platform 0xEF, `mkisofs -e`).
    Efi(usize),
}

/// Writes a bootable ISO 9660 image of `files` to `out` (see [`image`] for the names and the
/// label). Files larger than 4 GiB do not fit a directory record and are refused.
pub fn write_bootable(
    out: &mut std::fs::File,
    volume_label: &str,
    files: &[(&str, Source<'_>)],
    boot: Boot,
) -> std::io::Result<()> {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let mut listed = Vec::with_capacity(files.len());
    for (path, source) in files {
        let len = match source {
            Source::Bytes(b) => b.len() as u64,
            Source::File(p) => std::fs::metadata(p)?.len(),
        };
        if len > u64::from(u32::MAX) {
            return Err(std::io::Error::other(format!(
                "{path} is {len} bytes: an ISO 9660 file holds at most 4 GiB"
            )));
        }
        listed.push((*path, len));
    }
    let plan = plan(volume_label, &listed, Some(boot));
    out.set_len(0)?;
    out.write_all(&plan.head)?;
    for (i, (_, source)) in files.iter().enumerate() {
        out.seek(SeekFrom::Start((plan.file_lba[i] * SECTOR) as u64))?;
        match source {
            Source::Bytes(b) => match boot {
                Boot::Bios(loader) if loader == i => {
                    out.write_all(&with_boot_info_table(b, plan.file_lba[i]))?
                }
                _ => out.write_all(b)?,
            },
            Source::File(_) if matches!(boot, Boot::Bios(loader) if loader == i) => {
                return Err(std::io::Error::other(
                    "a BIOS boot loader is patched in memory: give it as bytes",
                ));
            }
            Source::File(p) => {
                let copied = std::io::copy(&mut std::fs::File::open(p)?, out)?;
                if copied != listed[i].1 {
                    return Err(std::io::Error::other(format!(
                        "{} changed while it was written into an ISO image",
                        p.display()
                    )));
                }
            }
        }
    }
    // The image is whole sectors long.
    out.set_len((plan.total * SECTOR) as u64)?;
    out.sync_all()
}

/// A boot loader with ISOLINUX's boot information table in bytes 8..64: the primary volume
/// descriptor's sector, its own sector and length, and the 32-bit sum of its bytes from 64 on.
fn with_boot_info_table(loader: &[u8], lba: usize) -> Vec<u8> {
    let mut b = loader.to_vec();
    if b.len() < 64 {
        return b;
    }
    let sum = b[64..].chunks(4).fold(0u32, |sum, word| {
        let mut w = [0u8; 4];
        w[..word.len()].copy_from_slice(word);
        sum.wrapping_add(u32::from_le_bytes(w))
    });
    let fields = [16, lba, loader.len(), sum as usize];
    for (i, v) in fields.into_iter().enumerate() {
        let v = u32::try_from(v).unwrap_or(u32::MAX);
        b[8 + 4 * i..12 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    b[24..64].fill(0);
    b
}

/// An image laid out: its first sectors (descriptors, boot catalog, path tables,
/// directories), where each file starts, and its length, in sectors.
struct Plan {
    head: Vec<u8>,
    file_lba: Vec<usize>,
    total: usize,
}

fn plan(volume_label: &str, files: &[(&str, u64)], boot: Option<Boot>) -> Plan {
    let mut tree = TreeDir::default();
    for (i, (path, _)) in files.iter().enumerate() {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((name, dirs)) = parts.split_last() else {
            continue;
        };
        let mut dir = &mut tree;
        for part in dirs {
            dir = dir.dirs.entry((*part).to_owned()).or_default();
        }
        dir.files.insert((*name).to_owned(), i);
    }
    let nodes = flatten(tree);
    let len = |i: usize| usize::try_from(files[i].1).unwrap_or(usize::MAX);

    let now = chrono::Utc::now();
    let (date, long_date) = dates(now);

    // Descriptors from sector 16: the primary, El Torito's boot record when booting, the
    // Joliet one, the terminator; then the boot catalog.
    let booting = usize::from(boot.is_some());
    let joliet_at = 17 + booting;
    let terminator_at = joliet_at + 1;
    let catalog_at = terminator_at + 1;
    let mut prim = layout(Hier::Primary, &nodes);
    let mut jol = layout(Hier::Joliet, &nodes);
    let mut lba = catalog_at + booting;
    for l in [&mut prim, &mut jol] {
        let n = sectors(l.pt_size);
        l.pt_l_lba = lba;
        l.pt_m_lba = lba + n;
        lba += 2 * n;
    }
    for l in [&mut prim, &mut jol] {
        for &d in &l.order {
            l.dir_lba[d] = lba;
            lba += l.dir_size[d] / SECTOR;
        }
    }
    let head_sectors = lba;
    let mut file_lba = vec![0; files.len()];
    for (i, lba_of) in file_lba.iter_mut().enumerate() {
        *lba_of = lba;
        lba += sectors(len(i));
    }
    let total = lba;

    let mut out = vec![0u8; head_sectors * SECTOR];
    let mut put = |at: usize, bytes: &[u8]| {
        out[at * SECTOR..at * SECTOR + bytes.len()].copy_from_slice(bytes)
    };
    for (h, l, at) in [(Hier::Primary, &prim, 16), (Hier::Joliet, &jol, joliet_at)] {
        let root = dir_record(&[0], l.dir_lba[0], l.dir_size[0], true, &date);
        put(
            at,
            &volume_descriptor(h, volume_label, total, l, &root, &long_date),
        );
        put(l.pt_l_lba, &path_table(h, &nodes, l, false));
        put(l.pt_m_lba, &path_table(h, &nodes, l, true));
        for (d, node) in nodes.iter().enumerate() {
            let p = node.parent;
            let mut recs = vec![
                dir_record(&[0], l.dir_lba[d], l.dir_size[d], true, &date),
                dir_record(&[1], l.dir_lba[p], l.dir_size[p], true, &date),
            ];
            for (id, e) in &l.entries[d] {
                recs.push(match *e {
                    Entry::Dir(c) => dir_record(id, l.dir_lba[c], l.dir_size[c], true, &date),
                    Entry::File(f) => dir_record(id, file_lba[f], len(f), false, &date),
                });
            }
            put(l.dir_lba[d], &pack_records(&recs));
        }
    }
    if let Some(boot) = boot {
        put(17, &boot_record(catalog_at));
        let (image, len) = match boot {
            Boot::Bios(i) | Boot::Efi(i) => (file_lba[i], len(i)),
        };
        put(catalog_at, &boot_catalog(boot, image, len));
    }
    let mut term = vec![0u8; SECTOR];
    term[0] = 255;
    term[1..6].copy_from_slice(b"CD001");
    term[6] = 1;
    put(terminator_at, &term);
    Plan {
        head: out,
        file_lba,
        total,
    }
}

/// El Torito's Boot Record Volume Descriptor: where the boot catalog is.
fn boot_record(catalog_lba: usize) -> Vec<u8> {
    let mut d = vec![0u8; SECTOR];
    d[1..6].copy_from_slice(b"CD001");
    d[6] = 1;
    d[7..7 + 23].copy_from_slice(b"EL TORITO SPECIFICATION");
    let lba = u32::try_from(catalog_lba).unwrap_or(u32::MAX);
    d[71..75].copy_from_slice(&lba.to_le_bytes());
    d
}

/// El Torito's boot catalog with one entry: the validation entry (platform x86 or EFI, its
/// checksum making the 16-bit words sum to 0) and the initial entry, bootable, no emulation.
fn boot_catalog(boot: Boot, image_lba: usize, image_len: usize) -> Vec<u8> {
    let mut c = vec![0u8; SECTOR];
    c[0] = 1;
    let load_sectors = match boot {
        Boot::Bios(_) => {
            c[1] = 0;
            4
        }
        Boot::Efi(_) => {
            c[1] = 0xEF;
            // In virtual (512-byte) sectors; an image too large for 16 bits is given as 0,
            // which UEFI firmware reads as "to the end of the image", as xorriso does.
            u16::try_from(image_len.div_ceil(512)).unwrap_or(0)
        }
    };
    c[4..10].copy_from_slice(b"FERRUM");
    c[30] = 0x55;
    c[31] = 0xAA;
    let sum = c[..32].chunks(2).fold(0u16, |s, w| {
        s.wrapping_add(u16::from_le_bytes([w[0], w[1]]))
    });
    c[28..30].copy_from_slice(&0u16.wrapping_sub(sum).to_le_bytes());
    c[32] = 0x88;
    c[38..40].copy_from_slice(&load_sectors.to_le_bytes());
    let lba = u32::try_from(image_lba).unwrap_or(u32::MAX);
    c[40..44].copy_from_slice(&lba.to_le_bytes());
    c
}

/// The 7-byte recording date of directory records and the 17-byte date of volume
/// descriptors, both in UTC (offset 0).
fn dates(now: chrono::DateTime<chrono::Utc>) -> ([u8; 7], [u8; 17]) {
    use chrono::{Datelike, Timelike};
    let b = |v: u32| u8::try_from(v).unwrap_or(0);
    let year = u32::try_from(now.year() - 1900).unwrap_or(0);
    let short = [
        b(year),
        b(now.month()),
        b(now.day()),
        b(now.hour()),
        b(now.minute()),
        b(now.second()),
        0,
    ];
    let s = now.format("%Y%m%d%H%M%S00").to_string();
    let mut long = [0u8; 17];
    long[..16].copy_from_slice(&s.as_bytes()[..16]);
    (short, long)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sector(iso: &[u8], n: usize) -> &[u8] {
        &iso[n * SECTOR..(n + 1) * SECTOR]
    }

    fn le32(b: &[u8]) -> usize {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
    }

    fn be32(b: &[u8]) -> usize {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
    }

    /// The records of a directory extent: (identifier, extent, length, flags).
    fn records(iso: &[u8], lba: usize, len: usize) -> Vec<(Vec<u8>, usize, usize, u8)> {
        let data = &iso[lba * SECTOR..lba * SECTOR + len];
        let mut out = Vec::new();
        let mut i = 0;
        while i < data.len() {
            let n = data[i] as usize;
            if n == 0 {
                i = (i / SECTOR + 1) * SECTOR;
                continue;
            }
            let r = &data[i..i + n];
            assert_eq!(le32(&r[2..6]), be32(&r[6..10]), "both-endian extent");
            assert_eq!(le32(&r[10..14]), be32(&r[14..18]), "both-endian length");
            assert!(r[18] >= 100, "recording date set");
            let id_len = r[32] as usize;
            out.push((
                r[33..33 + id_len].to_vec(),
                le32(&r[2..6]),
                le32(&r[10..14]),
                r[25],
            ));
            i += n;
        }
        out
    }

    fn find(recs: &[(Vec<u8>, usize, usize, u8)], id: &[u8]) -> (usize, usize, u8) {
        let r = recs
            .iter()
            .find(|r| r.0 == id)
            .unwrap_or_else(|| panic!("no {id:?} in {recs:?}"));
        (r.1, r.2, r.3)
    }

    fn sample() -> Vec<u8> {
        image(
            "config-2",
            &[
                ("openstack/latest/meta_data.json", b"{\"uuid\": \"u\"}"),
                ("openstack/latest/user_data", b"#cloud-config\n"),
                ("openstack/2012-08-10/vendor_data2.json", &[b'x'; 5000]),
            ],
        )
    }

    #[test]
    fn descriptors() {
        let iso = sample();
        assert_eq!(iso.len() % SECTOR, 0);
        assert!(iso[..16 * SECTOR].iter().all(|&b| b == 0), "system area");
        let pvd = sector(&iso, 16);
        assert_eq!((pvd[0], &pvd[1..6], pvd[6]), (1, &b"CD001"[..], 1));
        assert_eq!(&pvd[40..72], format!("{:<32}", "config-2").as_bytes());
        assert_eq!(le32(&pvd[80..84]) * SECTOR, iso.len());
        assert_eq!(le32(&pvd[80..84]), be32(&pvd[84..88]));
        let svd = sector(&iso, 17);
        assert_eq!((svd[0], &svd[1..6]), (2, &b"CD001"[..]));
        assert_eq!(&svd[88..91], b"%/E");
        assert_eq!(&svd[40..56], &ucs2("config-2")[..]);
        assert_eq!(&svd[56..58], &[0, b' ']);
        let term = sector(&iso, 18);
        assert_eq!((term[0], &term[1..6]), (255, &b"CD001"[..]));
    }

    #[test]
    fn primary_hierarchy_points_at_the_files() {
        let iso = sample();
        let pvd = sector(&iso, 16);
        let root = &pvd[156..190];
        let (root_lba, root_len) = (le32(&root[2..6]), le32(&root[10..14]));
        let recs = records(&iso, root_lba, root_len);
        assert_eq!(recs[0].0, vec![0]);
        assert_eq!(recs[1].0, vec![1]);
        assert_eq!(recs[1].1, root_lba, "root's .. is itself");
        let (os, os_len, flags) = find(&recs, b"OPENSTACK");
        assert_eq!(flags, 2);
        let recs = records(&iso, os, os_len);
        assert_eq!(recs[1].1, root_lba, ".. points to the parent");
        let names: Vec<_> = recs.iter().skip(2).map(|r| r.0.clone()).collect();
        assert_eq!(
            names,
            vec![b"2012_08_10".to_vec(), b"LATEST".to_vec()],
            "sorted"
        );
        let (latest, latest_len, _) = find(&recs, b"LATEST");
        let recs = records(&iso, latest, latest_len);
        let (f, len, flags) = find(&recs, b"META_DATA.JSON;1");
        assert_eq!(flags, 0);
        assert_eq!(&iso[f * SECTOR..f * SECTOR + len], b"{\"uuid\": \"u\"}");
        let (f, len, _) = find(&recs, b"USER_DATA.;1");
        assert_eq!(&iso[f * SECTOR..f * SECTOR + len], b"#cloud-config\n");
    }

    #[test]
    fn joliet_hierarchy_keeps_names() {
        let iso = sample();
        let svd = sector(&iso, 17);
        let root = &svd[156..190];
        let recs = records(&iso, le32(&root[2..6]), le32(&root[10..14]));
        let (os, os_len, _) = find(&recs, &ucs2("openstack"));
        let recs = records(&iso, os, os_len);
        let (d, d_len, _) = find(&recs, &ucs2("2012-08-10"));
        let recs = records(&iso, d, d_len);
        let (f, len, _) = find(&recs, &ucs2("vendor_data2.json;1"));
        assert_eq!(len, 5000);
        assert!(iso[f * SECTOR..f * SECTOR + len].iter().all(|&b| b == b'x'));
    }

    #[test]
    fn path_tables() {
        let iso = sample();
        let pvd = sector(&iso, 16);
        let size = le32(&pvd[132..136]);
        let l = le32(&pvd[140..144]);
        let m = be32(&pvd[148..152]);
        let lt = &iso[l * SECTOR..l * SECTOR + size];
        let mt = &iso[m * SECTOR..m * SECTOR + size];
        // Root, OPENSTACK, 2012_08_10, LATEST: 10 + 18 + 18 + 14 bytes.
        assert_eq!(size, 60);
        assert_eq!((lt[0], lt[8]), (1, 0));
        assert_eq!(le32(&lt[2..6]), le32(&pvd[158..162]), "root extent");
        assert_eq!(&lt[6..8], &[1, 0]);
        assert_eq!(&mt[6..8], &[0, 1]);
        assert_eq!(le32(&lt[2..6]), be32(&mt[2..6]));
        assert_eq!(&lt[18..27], b"OPENSTACK");
        assert_eq!(&lt[16..18], &[1, 0], "parent of OPENSTACK is root");
        assert_eq!(&lt[36..46], b"2012_08_10");
        assert_eq!(&lt[34..36], &[2, 0]);
    }

    #[test]
    fn primary_names() {
        assert_eq!(primary_ident("meta_data.json", false), b"META_DATA.JSON;1");
        assert_eq!(primary_ident("user_data", false), b"USER_DATA.;1");
        assert_eq!(primary_ident("a.b.c", false), b"A_B.C;1");
        assert_eq!(primary_ident("2012-08-10", true), b"2012_08_10");
    }

    /// A bootable image written to a file, read back as bytes.
    fn bootable(files: &[(&str, Source<'_>)], boot: Boot) -> Vec<u8> {
        let path = std::env::temp_dir().join(format!("ferrum-boot-{}.iso", uuid::Uuid::new_v4()));
        let mut out = std::fs::File::create(&path).expect("create");
        write_bootable(&mut out, "VMEDIA_BOOT_ISO", files, boot).expect("write");
        let iso = std::fs::read(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        iso
    }

    fn le16(b: &[u8]) -> usize {
        usize::from(u16::from_le_bytes([b[0], b[1]]))
    }

    #[test]
    fn a_bios_boot_image_has_its_catalog_and_boot_information_table() {
        let dir = std::env::temp_dir().join(format!("ferrum-boot-src-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let ramdisk = dir.join("initrd");
        std::fs::write(&ramdisk, vec![b'r'; 5000]).unwrap();
        let loader: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let iso = bootable(
            &[
                ("vmlinuz", Source::Bytes(b"kernel")),
                ("initrd", Source::File(&ramdisk)),
                ("isolinux/isolinux.bin", Source::Bytes(&loader)),
            ],
            Boot::Bios(2),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(iso.len() % SECTOR, 0);
        let record = sector(&iso, 17);
        assert_eq!(record[0], 0);
        assert_eq!(&record[1..6], b"CD001");
        assert_eq!(&record[7..30], b"EL TORITO SPECIFICATION");
        assert_eq!(sector(&iso, 18)[0], 2, "the Joliet descriptor follows");
        assert_eq!(sector(&iso, 19)[0], 255, "then the terminator");
        let catalog_lba = le32(&record[71..75]);
        let catalog = sector(&iso, catalog_lba);
        assert_eq!((catalog[0], catalog[1]), (1, 0), "validation entry, x86");
        assert_eq!((catalog[30], catalog[31]), (0x55, 0xAA));
        let sum = catalog[..32].chunks(2).map(le16).sum::<usize>() % 65536;
        assert_eq!(sum, 0, "the validation entry's words sum to 0");
        assert_eq!(
            (catalog[32], catalog[33]),
            (0x88, 0),
            "bootable, no emulation"
        );
        assert_eq!(le16(&catalog[38..40]), 4, "4 virtual sectors loaded");

        // The catalog points at isolinux.bin as the directory names it, patched.
        let pvd = sector(&iso, 16);
        let root = records(&iso, le32(&pvd[158..162]), le32(&pvd[166..170]));
        let (dir, dir_len, _) = find(&root, b"ISOLINUX");
        let (lba, len, _) = find(&records(&iso, dir, dir_len), b"ISOLINUX.BIN;1");
        assert_eq!(le32(&catalog[40..44]), lba);
        let written = &iso[lba * SECTOR..lba * SECTOR + len];
        assert_eq!(len, loader.len());
        assert_eq!(
            (
                le32(&written[8..12]),
                le32(&written[12..16]),
                le32(&written[16..20])
            ),
            (16, lba, loader.len())
        );
        let sum = loader[64..]
            .chunks(4)
            .map(|w| {
                let mut b = [0u8; 4];
                b[..w.len()].copy_from_slice(w);
                u32::from_le_bytes(b)
            })
            .fold(0u32, u32::wrapping_add);
        assert_eq!(le32(&written[20..24]), sum as usize);
        assert_eq!(&written[64..], &loader[64..], "the rest unchanged");
        let (lba, len, _) = find(&root, b"INITRD.;1");
        assert_eq!(
            &iso[lba * SECTOR..lba * SECTOR + len],
            &vec![b'r'; 5000][..]
        );
    }

    #[test]
    fn an_efi_boot_image_names_its_system_partition_in_virtual_sectors() {
        let esp = vec![0xE5u8; 3 * 2048 + 100];
        let iso = bootable(
            &[
                ("boot/grub/efiboot.img", Source::Bytes(&esp)),
                ("EFI/BOOT/grub.cfg", Source::Bytes(b"menuentry")),
            ],
            Boot::Efi(0),
        );
        let catalog = sector(&iso, le32(&sector(&iso, 17)[71..75]));
        assert_eq!(catalog[1], 0xEF, "platform EFI");
        let sum = catalog[..32].chunks(2).map(le16).sum::<usize>() % 65536;
        assert_eq!(sum, 0);
        assert_eq!(le16(&catalog[38..40]), esp.len().div_ceil(512));
        let lba = le32(&catalog[40..44]);
        assert_eq!(&iso[lba * SECTOR..lba * SECTOR + esp.len()], &esp[..]);
    }

    /// pycdlib reads the El Torito catalog and the files of a bootable image (skipped like
    /// the config drive's pycdlib tests when pycdlib is missing).
    #[test]
    fn pycdlib_reads_a_bootable_image() {
        let Some(python) = crate::configdrive::tests::pycdlib_python() else {
            return;
        };
        let loader = vec![7u8; 2500];
        let iso = bootable(
            &[
                ("vmlinuz", Source::Bytes(b"kernel")),
                ("isolinux/isolinux.bin", Source::Bytes(&loader)),
                ("isolinux/isolinux.cfg", Source::Bytes(b"default boot\n")),
            ],
            Boot::Bios(1),
        );
        let script = r#"
import io, sys, pycdlib
iso = pycdlib.PyCdlib()
iso.open(sys.argv[1])
cat = iso.eltorito_boot_catalog
print("platform", cat.validation_entry.platform_id, "sectors", cat.initial_entry.sector_count)
out = io.BytesIO()
iso.get_file_from_iso_fp(out, joliet_path="/isolinux/isolinux.cfg;1")
print(out.getvalue().decode().strip())
iso.close()
"#;
        let stdout = crate::configdrive::tests::run_pycdlib(&python, script, &iso);
        assert_eq!(stdout, "platform 0 sectors 4\ndefault boot\n");
    }
}

//! Images without building one: apt sources, missing tools, the cpio layout,
//! module order, dpkg versions, release names, the recipe hash.
use super::boot::{module_order_from, Cpio};
use super::host::{mirrors_deb822, mirrors_one_line};
use super::*;

#[test]
fn mirrors_from_apt_sources() {
    let deb822 = "Types: deb\n# comment\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n\
                  Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n";
    assert_eq!(mirrors_deb822(deb822), ["http://deb.debian.org/debian"]);
    let sec_only =
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n";
    assert!(mirrors_deb822(sec_only).is_empty());
    let disabled = "Enabled: no\nTypes: deb\nURIs: http://x/debian\nSuites: bookworm\n";
    assert!(mirrors_deb822(disabled).is_empty());
    let list = "# deb http://old/debian bookworm main\ndeb-src http://src/debian bookworm main\n\
                deb http://security.debian.org/debian-security bookworm-security main\n\
                deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n";
    assert_eq!(mirrors_one_line(list), ["http://mirror.example/debian"]);
}

#[test]
fn missing_host_tools_are_named_with_their_package() {
    let tools = [
        Tool { program: "roce-no-such-program-1", package: "pkg-one", why: "does one" },
        Tool { program: "sh", package: "dash", why: "is there" },
        Tool { program: "roce-no-such-program-2", package: "pkg-two", why: "does two" },
    ];
    let e = require_tools(&tools).unwrap_err().to_string();
    assert!(e.contains("roce-no-such-program-1 (pkg-one) — does one"), "{e}");
    assert!(e.contains("sudo apt-get install pkg-one pkg-two"), "{e}");
    assert!(!e.contains("dash"), "{e}");
    assert!(require_tools(&tools[1..2]).is_ok());
}

#[test]
fn cpio_newc_layout() {
    let mut c = Cpio::default();
    c.file("init", 0o755, b"#!/bin/sh\n");
    let b = c.finish();
    assert!(b.starts_with(b"070701"));
    assert_eq!(b.len() % 4, 0);
    // name size field (12th) of the first entry: "init\0" = 5
    assert_eq!(&b[6 + 11 * 8..6 + 12 * 8], b"00000005");
    assert!(b.windows(10).any(|w| w == b"TRAILER!!!"));
}

#[test]
fn builtin_modules_are_left_out_and_dependencies_come_first() {
    // Trixie's layout: compressed modules, virtio_pci and virtio_console built in.
    let dep = "kernel/drivers/block/virtio_blk.ko.xz:\n\
               kernel/crypto/crc32c_generic.ko.xz:\n\
               kernel/fs/ext4/ext4.ko.xz: kernel/fs/jbd2/jbd2.ko.xz kernel/fs/mbcache.ko.xz\n\
               kernel/fs/jbd2/jbd2.ko.xz:\nkernel/fs/mbcache.ko.xz:\n\
               kernel/drivers/net/virtio_net.ko.xz: kernel/net/core/failover.ko.xz\nkernel/net/core/failover.ko.xz:\n\
               kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz\nkernel/net/9p/9pnet.ko.xz:\n\
               kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz\n\
               kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz\n\
               kernel/drivers/infiniband/core/ib_core.ko.xz:\n\
               kernel/drivers/infiniband/core/rdma_ucm.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz\n";
    let builtin = "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/char/virtio_console.ko\n";
    let order = module_order_from(dep, builtin, MODULES).expect("every module found");
    let pos = |m: &str| {
        order
            .iter()
            .position(|p| p.ends_with(m))
            .unwrap_or_else(|| panic!("{m} missing from {order:?}"))
    };
    assert!(
        pos("jbd2.ko.xz") < pos("ext4.ko.xz")
            && pos("9pnet.ko.xz") < pos("9p.ko.xz")
            && pos("ib_core.ko.xz") < pos("rdma_rxe.ko.xz")
    );
    assert_eq!(order.iter().filter(|p| p.ends_with("ib_core.ko.xz")).count(), 1, "{order:?}");
    assert!(
        !order.iter().any(|p| p.contains("virtio_pci") || p.contains("virtio_console")),
        "{order:?}"
    );
    // Not built in and not in modules.dep: an error that names it.
    let e = module_order_from(dep, "", MODULES).unwrap_err().to_string();
    assert!(e.contains("virtio_pci"), "{e}");
    // Linux 7.x has no crc32c_generic (ext4 uses the built-in crc32c library):
    // the backports image does without it, the others still load it.
    let dep7: String =
        dep.lines().filter(|l| !l.contains("crc32c")).map(|l| l.to_string() + "\n").collect();
    let e = module_order_from(&dep7, builtin, MODULES).unwrap_err().to_string();
    assert!(e.contains("crc32c_generic"), "{e}");
    let order = module_order_from(&dep7, builtin, &modules(Release::TrixieBackports))
        .expect("every module of the 7.x image found");
    assert!(order.iter().any(|p| p.ends_with("rdma_rxe.ko.xz")), "{order:?}");
    assert_eq!(modules(Release::Bookworm), MODULES);
    assert_eq!(modules(Release::Trixie), MODULES);
}

#[test]
fn setup_versions_come_from_dpkg_and_are_checked() {
    let status = "Package: rdma-core\nStatus: install ok installed\nVersion: 56.1-1\n\n\
                  Package: linux-image-6.12.117+deb13-amd64\nStatus: install ok installed\nVersion: 6.12.117-1\n\n\
                  Package: linux-image-amd64\nStatus: install ok installed\nVersion: 6.12.117-1\n\n\
                  Package: perftest\nStatus: deinstall ok config-files\nVersion: 4.5-1\n\n\
                  Package: libc6\nStatus: install ok installed\nVersion: 2.41-12\n";
    let v = parse_dpkg_status(status);
    assert_eq!(v.get("rdma-core").map(String::as_str), Some("56.1-1"));
    assert_eq!(v.get("linux-image").map(String::as_str), Some("6.12.117-1"));
    assert_eq!(v.get("perftest"), None, "only installed packages count");
    assert!(check_versions(Release::Trixie, "6.12.117+deb13-amd64", &v).is_ok());
    let e = check_versions(Release::Bookworm, "6.12.117+deb13-amd64", &v).unwrap_err().to_string();
    assert!(e.contains("not the Linux 6.1.x and rdma-core 44.x"), "{e}");
}

#[test]
fn releases_by_name() {
    assert_eq!("trixie".parse::<Release>(), Ok(Release::Trixie));
    assert_eq!("trixie-backports".parse::<Release>(), Ok(Release::TrixieBackports));
    assert_eq!(Release::default(), Release::Bookworm);
    let e = "sid".parse::<Release>().unwrap_err();
    assert!(
        e.contains(
            "bookworm (Debian 12: Linux 6.1, rdma-core 44), trixie (Debian 13: Linux 6.12, rdma-core 56), \
             trixie-backports (Debian 13 with the backports kernel: Linux 7.x, rdma-core 56)"
        ),
        "{e}"
    );
    assert_eq!(Release::Trixie.default_lab(), "trixie");
    assert_eq!(Release::TrixieBackports.default_lab(), "trixie-backports");
    // The lab's state names the image as its name, both ways.
    for r in Release::ALL {
        assert_eq!(serde_json::to_value(r).unwrap(), r.name(), "{r:?}");
        assert_eq!(serde_json::from_value::<Release>(r.name().into()).unwrap(), r);
        assert_eq!(r.name().parse::<Release>(), Ok(r));
    }
    let dirs: std::collections::BTreeSet<PathBuf> =
        Release::ALL.iter().map(|r| image_dir(Path::new("/c"), *r)).collect();
    assert_eq!(dirs.len(), Release::ALL.len(), "each image has its own directory");
}

#[test]
fn the_backports_image_is_trixie_with_the_kernel_from_backports() {
    let r = Release::TrixieBackports;
    assert_eq!((r.suite(), r.kernel_suite()), ("trixie", Some("trixie-backports")));
    assert_eq!((Release::Trixie.suite(), Release::Trixie.kernel_suite()), ("trixie", None));
    // debootstrap leaves the kernel to apt, but brings the initramfs generator
    // its package needs (or apt would pull in dracut).
    let boot = debootstrap_packages(r);
    assert!(!boot.contains(&"linux-image-amd64") && boot.contains(&"initramfs-tools"), "{boot:?}");
    assert_eq!(debootstrap_packages(Release::Trixie), PACKAGES);
    assert_eq!(
        apt::sources_line("http://deb.debian.org/debian", "trixie-backports"),
        "deb http://deb.debian.org/debian trixie-backports main\n"
    );
    // trixie's user space and rdma-core under a 7.x kernel, checked.
    let status = "Package: rdma-core\nStatus: install ok installed\nVersion: 56.1-1\n\n\
                  Package: linux-image-7.3.4+deb13-amd64\nStatus: install ok installed\nVersion: 7.3.4-1~bpo13+1\n";
    let v = parse_dpkg_status(status);
    assert_eq!(v.get("linux-image").map(String::as_str), Some("7.3.4-1~bpo13+1"));
    assert!(check_versions(r, "7.3.4+deb13-amd64", &v).is_ok());
    let e = check_versions(r, "6.12.117+deb13-amd64", &v).unwrap_err().to_string();
    assert!(e.contains("not the Linux 7.x and rdma-core 56.x"), "{e}");
}

#[test]
fn recipe_hash_is_stable() {
    assert_eq!(recipe_hash(Release::Trixie), recipe_hash(Release::Trixie));
    assert_ne!(recipe_hash(Release::Bookworm), recipe_hash(Release::Trixie));
    assert_ne!(recipe_hash(Release::Trixie), recipe_hash(Release::TrixieBackports));
    // The images built before trixie-backports was added are still current:
    // these hashes are in their manifests (a changed recipe rebuilds an image,
    // minutes each; bump them only with a change that must rebuild).
    assert_eq!(recipe_hash(Release::Bookworm), "eb966e213de4dd54");
    assert_eq!(recipe_hash(Release::Trixie), "3817577363910159");
    assert_eq!(fnv(&["a", "b"]), fnv(&["a", "b"]));
    assert_ne!(fnv(&["ab"]), fnv(&["a", "b"]));
}

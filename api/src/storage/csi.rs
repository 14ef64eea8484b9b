//! Mirrors the names pkg/volume/csi gives a CSI volume, which the attach-detach controller and
//! the kubelet must compute alike: the volume's unique name (csi_plugin.go's GetVolumeName,
//! volNameSep) in a node's `volumesInUse` and `volumesAttached`, and its VolumeAttachment's name
//! on a node (csi_attacher.go's getAttachmentName).

/// The CSI volume plugin's name, the prefix of its unique volume names.
pub const CSI_PLUGIN_NAME: &str = "kubernetes.io/csi";
/// Between the driver and the handle in a unique volume name (volNameSep).
pub const VOL_NAME_SEP: &str = "^";

/// `kubernetes.io/csi/<driver>^<volumeHandle>`.
pub fn unique_volume_name(driver: &str, volume_handle: &str) -> String {
    format!("{CSI_PLUGIN_NAME}/{driver}{VOL_NAME_SEP}{volume_handle}")
}

/// `csi-` and the hex SHA-256 of the handle, the driver and the node, concatenated.
pub fn attachment_name(volume_handle: &str, driver: &str, node_name: &str) -> String {
    format!("csi-{}", sha256_hex(&format!("{volume_handle}{driver}{node_name}")))
}

/// Lowercase hex of the SHA-256 of `s` (the kubelet also names a volume's staging directory so).
pub fn sha256_hex(s: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, s.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kubernetes_ones() {
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(unique_volume_name("hostpath.csi.kubelab.io", "vol-1"), "kubernetes.io/csi/hostpath.csi.kubelab.io^vol-1");
        let name = attachment_name("vol-1", "hostpath.csi.kubelab.io", "node-a");
        assert_eq!(name, format!("csi-{}", sha256_hex("vol-1hostpath.csi.kubelab.ionode-a")));
        assert_eq!(name.len(), 4 + 64);
    }
}

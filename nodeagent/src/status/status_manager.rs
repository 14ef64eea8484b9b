//! Mirrors kubelet's status_manager.go (in progress)

//! Mirrors pkg/controller/volume/persistentvolume: the PersistentVolume binder
//! (`persistentvolume-binder`) — its decisions ([`pv_controller`]), the volume index that picks a
//! volume for a claim ([`index`]), the helpers both use ([`util`]), and its watches, queues and
//! writes ([`pv_controller_base`]).

pub mod index;
pub mod pv_controller;
pub mod pv_controller_base;
pub mod util;

pub use pv_controller_base::PersistentVolumeController;

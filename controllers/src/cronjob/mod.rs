//! Mirrors pkg/controller/cronjob: the CronJob controller ([`cronjob_controllerv2`]) and its
//! schedule arithmetic and other decisions ([`utils`]).

pub mod cronjob_controllerv2;
pub mod utils;

pub use cronjob_controllerv2::CronJobController;

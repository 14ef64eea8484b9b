//! Glue between the field errors validation reports (`field.ErrorList`, from the `api` crate)
//! and the 422 causes of a Status.

use apimachinery::validation::FieldError;

use crate::error::Cause;

pub fn causes(errs: Vec<FieldError>) -> Vec<Cause> {
    errs.into_iter().map(|e| Cause { reason: e.reason_str().to_string(), field: e.field, message: e.message }).collect()
}

//! Mirrors k8s.io/apiserver/pkg/authentication/token/tokenfile/tokenfile.go: `--token-auth-file`,
//! a CSV file of static bearer tokens — `token,user,uid,"group1,group2"` a line — read once at
//! start. For teaching and tests: a token never expires and is only revoked by editing the file
//! and restarting the server.

use std::collections::HashMap;
use std::path::Path;

use super::TokenAuthenticator;
use crate::authentication::user::UserInfo;

pub struct TokenFile {
    tokens: HashMap<String, UserInfo>,
}

impl TokenFile {
    /// Reads the file (`NewCSV`): at least three columns a record; a record with an empty token
    /// is skipped, a repeated token's last record wins (each with a warning, as Kubernetes does).
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--token-auth-file {}: {e}", path.display()))?;
        let mut tokens = HashMap::new();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let record = split_csv(line).map_err(|e| format!("token file '{}', line {}: {e}", path.display(), i + 1))?;
            if record.len() < 3 {
                return Err(format!("token file '{}' must have at least 3 columns (token, user name, user uid), found {}", path.display(), record.len()));
            }
            if record[0].is_empty() {
                tracing::warn!(target: "apiserver::authentication", file = %path.display(), record = i + 1, "empty token has been found in token file");
                continue;
            }
            let groups = record.get(3).map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(String::from).collect()).unwrap_or_default();
            let user = UserInfo { name: record[1].clone(), uid: record[2].clone(), groups, ..Default::default() };
            if tokens.insert(record[0].clone(), user).is_some() {
                tracing::warn!(target: "apiserver::authentication", file = %path.display(), record = i + 1, "duplicate token has been found in token file");
            }
        }
        Ok(TokenFile { tokens })
    }
}

impl TokenAuthenticator for TokenFile {
    fn authenticate_token(&self, token: &str, _audiences: &[String]) -> Result<Option<UserInfo>, String> {
        Ok(self.tokens.get(token).cloned())
    }
}

/// One CSV record (Go's encoding/csv with leading spaces trimmed): fields split at commas, a
/// field in double quotes may hold commas and `""` for a quote.
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("a quoted field is not closed".into()),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => {}
                Some(c) => return Err(format!("{c:?} after a quoted field")),
            }
        } else {
            loop {
                match chars.next() {
                    Some(',') => break,
                    Some(c) => field.push(c),
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                }
            }
        }
        fields.push(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_users_and_groups() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "s3cret,jane,u1,\"devs,ops\"\n\n t2, bob, u2\n,nobody,u3\n").expect("written");
        let file = TokenFile::from_file(&path).expect("read");
        let jane = file.authenticate_token("s3cret", &[]).expect("no error").expect("jane");
        assert_eq!((jane.name.as_str(), jane.uid.as_str(), jane.groups.as_slice()), ("jane", "u1", &["devs".to_string(), "ops".to_string()][..]));
        assert_eq!(file.authenticate_token("t2", &[]).expect("no error").expect("bob").name, "bob");
        assert!(file.authenticate_token("", &[]).expect("no error").is_none(), "the empty token was skipped");
        assert!(file.authenticate_token("nope", &[]).expect("no error").is_none());
        std::fs::write(&path, "only,two\n").expect("written");
        assert!(TokenFile::from_file(&path).err().expect("refused").ends_with("must have at least 3 columns (token, user name, user uid), found 2"));
    }
}

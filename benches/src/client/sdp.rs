//! The one edit the client makes to the offers the WebRTC state writes: the SSRCs it picks.

use str0m::media::Mid;

/// The offer with the SSRCs of section `mid` replaced, in order of first mention (the media
/// stream's, then its retransmissions'), by `ssrcs`: the client picks its own, which the
/// WebRTC state would otherwise draw at random.
pub(crate) fn with_ssrcs(sdp: &str, mid: Mid, ssrcs: &[u32]) -> String {
    let mut sections: Vec<Vec<String>> = vec![Vec::new()];
    for line in sdp.split("\r\n") {
        if line.starts_with("m=") {
            sections.push(Vec::new());
        }
        sections
            .last_mut()
            .expect("one at least")
            .push(line.to_owned());
    }
    for section in &mut sections {
        let this_mid = section.iter().find_map(|l| l.strip_prefix("a=mid:"));
        if this_mid != Some(&*mid) {
            continue;
        }
        let mut old: Vec<String> = Vec::new();
        for line in section.iter() {
            for word in ssrc_words(line) {
                if !old.iter().any(|o| o == word) {
                    old.push(word.to_owned());
                }
            }
        }
        for line in section.iter_mut() {
            let Some((name, rest)) = line.split_once(':') else {
                continue;
            };
            if !name.starts_with("a=ssrc") {
                continue;
            }
            let rewritten: Vec<String> = rest
                .split(' ')
                .map(|word| match old.iter().position(|o| o == word) {
                    Some(i) if i < ssrcs.len() => ssrcs[i].to_string(),
                    _ => word.to_owned(),
                })
                .collect();
            *line = format!("{name}:{}", rewritten.join(" "));
        }
    }
    sections.concat().join("\r\n")
}

/// The SSRCs a line names: the first word of `a=ssrc:`, the words after the semantics of
/// `a=ssrc-group:`.
fn ssrc_words(line: &str) -> Vec<&str> {
    if let Some(rest) = line.strip_prefix("a=ssrc:") {
        rest.split(' ').take(1).collect()
    } else if let Some(rest) = line.strip_prefix("a=ssrc-group:") {
        rest.split(' ').skip(1).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssrcs_of_one_section_are_replaced_in_order() {
        let sdp = "v=0\r\nm=audio 9 X 111\r\na=mid:0\r\na=ssrc:5 cname:a\r\n\
                   m=video 9 X 96\r\na=mid:1\r\na=ssrc-group:FID 7 8\r\na=ssrc:7 cname:b\r\n\
                   a=ssrc:8 cname:b\r\n";
        let out = with_ssrcs(sdp, Mid::from("1"), &[70, 80]);
        assert!(out.contains("a=ssrc:5 cname:a"), "{out}");
        assert!(out.contains("a=ssrc-group:FID 70 80"), "{out}");
        assert!(
            out.contains("a=ssrc:70 cname:b\r\na=ssrc:80 cname:b"),
            "{out}"
        );
        assert!(!out.contains("a=ssrc:7 "), "{out}");
    }
}

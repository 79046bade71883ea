// XML markup in and out: a corpus of round trips, canonical output, and hostile input refused with
// the right status and byte offset.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include <folio/markup.hpp>

namespace {

using folio::markup::node;
using folio::markup::parse_status;

folio::markup::fragment parsed(std::string_view s) {
  folio::markup::fragment f;
  const auto r = folio::markup::parse(s, f);
  EXPECT_TRUE(r) << r.description() << " in " << s;
  return f;
}

folio::markup::parse_result refused(std::string_view s) {
  folio::markup::fragment f;
  auto r = folio::markup::parse(s, f);
  EXPECT_FALSE(r) << s;
  EXPECT_TRUE(f.empty());
  return r;
}

/// `s` refused with `status` at byte `offset` (saying `message`, when given).
void expect_refused(std::string_view s, parse_status status, std::size_t offset, std::optional<std::string_view> message = {}) {
  const auto r = refused(s);
  EXPECT_EQ(r.status, status) << s;
  EXPECT_EQ(r.offset, offset) << s;
  if (message) {
    EXPECT_EQ(r.message, *message) << s;
  }
}

TEST(Markup, FragmentsHoldSeveralTopLevelNodesAndText) {
  const auto f = parsed("lead <p a=\"1\">x<b>y</b>z</p> tail<br/>");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0], node::make_text("lead "));
  EXPECT_EQ(f[1].name, "p");
  EXPECT_EQ(f[1].attributes, (std::vector<folio::markup::attribute>{{"a", "1"}}));
  ASSERT_EQ(f[1].children.size(), 3u);
  EXPECT_EQ(f[1].children[1].children[0].text, "y");
  EXPECT_EQ(f[2].text, " tail");
  EXPECT_EQ(f[3], node::make_element("br"));
}

// Each corpus entry: input, canonical output. parse(canonical) must give the same nodes again.
TEST(Markup, CorpusRoundTripsThroughCanonicalForm) {
  const std::pair<std::string, std::string> corpus[] = {
      {"", ""},
      {"plain text only", "plain text only"},
      {"<a/>", "<a/>"},
      {"<a></a>", "<a/>"},
      {R"(<a z="3" b="2" a="1"/>)", R"(<a a="1" b="2" z="3"/>)"},  // attributes by name
      {R"(<a t="&lt;&amp;&gt;&quot;&apos;"/>)", R"(<a t="&lt;&amp;&gt;&quot;'"/>)"},
      {"<a>&lt;tag&gt; &amp; &#65;&#x42;</a>", "<a>&lt;tag&gt; &amp; AB</a>"},
      {"<a>x<![CDATA[<y> & z]]>w</a>", "<a>x&lt;y&gt; &amp; zw</a>"},  // CDATA is text
      {"<w:p xmlns:w=\"urn:w\"><w:r>Hi</w:r></w:p>", "<w:p xmlns:w=\"urn:w\"><w:r>Hi</w:r></w:p>"},
      {"<p>mixed <em>content</em> and <strong>more <em>nested</em></strong>.</p>",
       "<p>mixed <em>content</em> and <strong>more <em>nested</em></strong>.</p>"},
      {"<p>  </p>\n<p>\t</p>", "<p>  </p>\n<p>\t</p>"},  // whitespace is content
      {"<p>Grüße, 日本語, emoji 😀</p>", "<p>Grüße, 日本語, emoji 😀</p>"},
      {"<é ñ=\"ü\">ö</é>", "<é ñ=\"ü\">ö</é>"},
      {"<a>l1\r\nl2\rl3</a>", "<a>l1\nl2\nl3</a>"},                        // line ends normalised
      {"<a v=\"x\r\ny\tz\"/>", "<a v=\"x y z\"/>"},                         // attribute whitespace normalised
      {"<a v=\"x&#10;y&#9;z&#13;\"/>", "<a v=\"x&#10;y&#9;z&#13;\"/>"},  // ... unless written as references
      {"<a>&#13;</a>", "<a>&#13;</a>"},
      {"<a>x]]y > z</a>", "<a>x]]y &gt; z</a>"},
  };
  for (const auto& [in, canonical] : corpus) {
    SCOPED_TRACE(in);
    const auto f = parsed(in);
    EXPECT_EQ(folio::markup::serialize(f), canonical);
    EXPECT_EQ(parsed(canonical), f);
  }
}

// parse() builds a flat_fragment: every list a run of nodes placed after its owner, attributes ordered
// by name, text and CDATA merged into one node, an empty CDATA section no node at all. `fragment`
// converts both ways.
TEST(Markup, TheFlatLayoutKeepsItsInvariants) {
  using folio::markup::flat_fragment;
  flat_fragment f;
  ASSERT_TRUE(folio::markup::parse(R"(lead<![CDATA[]]><p z="1" a="2">x<![CDATA[<y>]]><![CDATA[]]>&amp;<b/></p><![CDATA[]]><q><![CDATA[]]></q>)", f));
  ASSERT_EQ(f.top().count, 3u);  // "lead", <p>, <q>: the empty CDATA sections make no node
  EXPECT_EQ(f.node_count(), 5u);  // and <p>'s "x<y>&", <b>; <q> has no children
  for (flat_fragment::index i = 0; i < f.node_count(); ++i) {
    const auto& n = f.at(i);
    if (n.type != node::kind::element) continue;
    if (n.children.count) {
      EXPECT_GT(n.children.first, i) << "a list is placed after its owner";
    }
    EXPECT_LE(n.children.end(), f.node_count());
    for (auto a = n.attrs.first; a + 1 < n.attrs.end(); ++a) EXPECT_LT(f.str(f.attr_at(a).name), f.str(f.attr_at(a + 1).name));
  }
  const auto& p = f.at(f.top().first + 1);
  ASSERT_EQ(p.children.count, 2u);
  EXPECT_EQ(f.str(f.at(p.children.first)), "x<y>&");
  EXPECT_EQ(f.str(f.attr_at(p.attrs.first).name), "a");
  EXPECT_EQ(f.at(f.top().first + 2).children.count, 0u);
  EXPECT_EQ(folio::markup::serialize(f), R"(lead<p a="2" z="1">x&lt;y&gt;&amp;<b/></p><q/>)");
  EXPECT_EQ(folio::markup::serialize(flat_fragment::from(f.to_fragment())), folio::markup::serialize(f));
  flat_fragment only_empty;
  ASSERT_TRUE(folio::markup::parse("<![CDATA[]]><![CDATA[]]>", only_empty));
  EXPECT_TRUE(only_empty.empty());
  EXPECT_EQ(only_empty.node_count(), 0u);
}

// A fragment built by hand may list attributes in any order and a name twice: flat_fragment::from
// orders them and keeps the last of a name (what setting them in turn leaves), as serialize() does.
TEST(Markup, AFragmentBuiltByHandIsOrderedAndKeepsTheLastOfAName) {
  const folio::markup::fragment f{node::make_element("a", {{"z", "1"}, {"b", "2"}, {"z", "3"}}, {node::make_text("x"), node::make_text(""), node::make_text("y")})};
  const auto flat = folio::markup::flat_fragment::from(f);
  EXPECT_EQ(folio::markup::serialize(flat), R"(<a b="2" z="3">xy</a>)");
  const auto& a = flat.at(flat.top().first);
  EXPECT_EQ(a.attrs.count, 2u);
  EXPECT_EQ(a.children.count, 3u);  // adjacent and empty text nodes stay as they are (the CRDT tree's can be)
  EXPECT_EQ(flat.to_fragment()[0].children, f[0].children);
}

TEST(Markup, NestingUpToTheLimitIsAccepted) {
  std::string s;
  for (int i = 0; i < 256; ++i) s += "<d>";
  s += "x";
  for (int i = 0; i < 256; ++i) s += "</d>";
  const auto f = parsed(s);
  EXPECT_EQ(folio::markup::serialize(f), s);
}

TEST(Markup, TenThousandDeepNestingIsRefusedAtLevel257) {
  std::string s;
  for (int i = 0; i < 10000; ++i) s += "<d>";
  for (int i = 0; i < 10000; ++i) s += "</d>";
  const auto r = refused(s);
  EXPECT_EQ(r.status, parse_status::too_deep);
  EXPECT_EQ(r.offset, 256u * 3 + 1);  // the name of the 257th <d>
  EXPECT_EQ(r.description(), "elements nested deeper than 256 levels at byte 769");
}

TEST(Markup, BillionLaughsAndExternalEntitiesNeverGetADtd) {
  const std::string laughs =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;&lol;\">]><lolz>&lol2;</lolz>";
  EXPECT_EQ(refused(laughs).status, parse_status::declaration);
  const auto r = refused(laughs.substr(22));
  EXPECT_EQ(r.status, parse_status::doctype);
  EXPECT_EQ(r.offset, 0u);
  const auto ext = refused("<a/><!DOCTYPE a SYSTEM \"file:///etc/passwd\">");
  EXPECT_EQ(ext.status, parse_status::doctype);
  EXPECT_EQ(ext.offset, 4u);
  EXPECT_EQ(refused("<!DOCTYPE a [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><a>&x;</a>").status, parse_status::doctype);
}

TEST(Markup, ReferencesMustBeDefined) {
  expect_refused("<p>caf&eacute;</p>", parse_status::bad_reference, 6, "undefined entity reference &eacute;");
  auto r = refused("<p a=\"x &nbsp;\"/>");
  EXPECT_EQ(r.status, parse_status::bad_reference);
  EXPECT_EQ(r.offset, 8u);
  EXPECT_EQ(refused("<p>a & b</p>").status, parse_status::bad_reference);
  EXPECT_EQ(refused("<p>&#0;</p>").status, parse_status::bad_reference);
  EXPECT_EQ(refused("<p>&#xD800;</p>").status, parse_status::bad_reference);
  EXPECT_EQ(refused("<p>&#12345678901;</p>").status, parse_status::bad_reference);
  EXPECT_EQ(refused("<p>&#x;</p>").status, parse_status::bad_reference);
}

TEST(Markup, ADuplicateAttributeIsReportedAtItsFirstRepeatInDocumentOrder) {
  // "b" repeats before "a" does; "a" sorts first, but the refusal names the first repeat as written.
  expect_refused("<e a=\"1\" b=\"2\" b=\"3\" a=\"4\"/>", parse_status::duplicate_attribute, 15, "attribute \"b\" appears twice");
  // A third occurrence does not move it; an attribute breaking another rule first is reported instead.
  auto r = refused("<e z=\"1\" z=\"2\" z=\"3\"/>");
  EXPECT_EQ(r.offset, 9u);
  r = refused("<e a=\"<\" a=\"2\"/>");
  EXPECT_EQ(r.status, parse_status::lt_in_attribute);
  r = refused("<e a=\"1\" a=\"&bad;\" b=\"<\"/>");
  EXPECT_EQ(r.status, parse_status::duplicate_attribute);
  EXPECT_EQ(r.offset, 9u);
  // Many distinct attributes are kept, ordered by name; one repeat among them is found.
  std::string many = "<e";
  for (int i = 0; i < 3000; ++i) many += " a" + std::to_string(2999 - i) + "=\"" + std::to_string(i) + "\"";
  const folio::markup::fragment f = parsed(many + "/>");
  ASSERT_EQ(f[0].attributes.size(), 3000u);
  EXPECT_TRUE(std::is_sorted(f[0].attributes.begin(), f[0].attributes.end(), [](const auto& x, const auto& y) { return x.name < y.name; }));
  const std::string with_repeat = many + " a17=\"x\"/>";
  r = refused(with_repeat);
  EXPECT_EQ(r.status, parse_status::duplicate_attribute);
  EXPECT_EQ(r.offset, many.size() + 1);
}

TEST(Markup, WellFormednessRulesPugixmlLeavesToUs) {
  expect_refused("<a x=\"1\" y=\"2\" x=\"3\"/>", parse_status::duplicate_attribute, 15);
  expect_refused("<a x=\"1<2\"/>", parse_status::lt_in_attribute, 7);
  expect_refused("<a>x]]>y</a>", parse_status::cdata_end_in_text, 4);
  EXPECT_EQ(parsed("<a\xC2\xB7/>")[0].name, "a\xC2\xB7");                       // U+00B7 may follow a name start ...
  EXPECT_EQ(refused("<\xC2\xB7" "a/>").status, parse_status::invalid_name);  // ... but not start a name
  expect_refused("<a\xE2\x98\x83/>", parse_status::invalid_name, 1);  // U+2603 is no name character at all
  EXPECT_EQ(refused("<a b\xE2\x80\x8B=\"1\"/>").status, parse_status::invalid_name);  // U+200B
}

TEST(Markup, UnbalancedOrBrokenMarkupIsMalformed) {
  for (const char* s : {"<a>", "<a></b>", "</a>", "<a><b></a></b>", "<a b=1/>", "<a b=\"1/>", "<>", "<a", "text</p>"}) {
    const auto r = refused(s);
    EXPECT_EQ(r.status, parse_status::malformed) << s;
    EXPECT_NE(r.message.find("not well-formed"), std::string::npos);
  }
  EXPECT_EQ(refused("<a><b></a>").description(), "not well-formed: start-end tags mismatch at byte 8");
}

TEST(Markup, CommentsAndProcessingInstructionsAreRefusedNotDropped) {
  expect_refused("<p>a<!-- note -->b</p>", parse_status::comment, 4);
  expect_refused("<p>a<?php echo 1; ?>b</p>", parse_status::processing_instruction, 4);
}

TEST(Markup, BytesThatAreNotXmlCharactersAreRefused) {
  auto r = refused(std::string("<a>x\0y</a>", 10));
  EXPECT_EQ(r.status, parse_status::invalid_character);
  EXPECT_EQ(r.offset, 4u);
  EXPECT_EQ(refused("<a>\x01</a>").status, parse_status::invalid_character);
  EXPECT_EQ(refused("<a>\xEF\xBF\xBE</a>").status, parse_status::invalid_character);  // U+FFFE
  r = refused("<a>\xC3\x28</a>");
  EXPECT_EQ(r.status, parse_status::invalid_utf8);
  EXPECT_EQ(r.offset, 3u);
}

TEST(Markup, ALeadingByteOrderMarkIsASignatureButALeadingU_FEFFInTextSurvives) {
  EXPECT_EQ(parsed("\xEF\xBB\xBF<a/>"), parsed("<a/>"));
  const auto f = parsed("\xEF\xBB\xBF\xEF\xBB\xBFx");  // fuzzer-found: the second one is text
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].text, "\xEF\xBB\xBFx");
  EXPECT_EQ(folio::markup::serialize(f), "&#65279;x");
  EXPECT_EQ(parsed(folio::markup::serialize(f)), f);
}

TEST(Markup, SerialisingBuiltNodesEscapesEverythingThatNeedsIt) {
  const folio::markup::fragment f{node::make_text("1 < 2 & \"q\"\r"),
                                  node::make_element("a", {{"t", "<\"&'>\t\n"}}, {node::make_text("]]>")})};
  const std::string s = folio::markup::serialize(f);
  EXPECT_EQ(s, "1 &lt; 2 &amp; \"q\"&#13;<a t=\"&lt;&quot;&amp;'&gt;&#9;&#10;\">]]&gt;</a>");
  EXPECT_EQ(parsed(s), f);
}

}  // namespace

//! Builders for what `describe` returns: the provider, its types and their attributes.

use crate::Value;

/// The data type of one value of an attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum DataType {
    /// Any value.
    Any,
    /// `true` or `false`.
    Boolean,
    /// An integer.
    Integer,
    /// A float.
    Float,
    /// A string.
    String,
    /// One of these strings, exactly.
    Enum(Vec<String>),
    /// An array of values of one data type.
    Array(Box<DataType>),
    /// A hash from strings to values of one data type.
    Hash(Box<DataType>),
    /// A value of any of these data types.
    OneOf(Vec<DataType>),
    /// A type declared in a manifest, by name.
    Named(String),
}

impl DataType {
    /// `Enum[...]` from string slices.
    ///
    /// ```no_run
    /// # use wconverge_sdk::DataType;
    /// let ensure = DataType::enumeration(["file", "absent"]);
    /// ```
    pub fn enumeration<const N: usize>(cases: [&str; N]) -> Self {
        DataType::Enum(cases.iter().map(|case| (*case).to_owned()).collect())
    }

    /// `Array[of]`.
    pub fn array_of(of: DataType) -> Self {
        DataType::Array(Box::new(of))
    }

    /// `Hash[String, of]`.
    pub fn hash_of(of: DataType) -> Self {
        DataType::Hash(Box::new(of))
    }
}

/// What an attribute is, in the terms of Puppet's resource API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// State the provider reads and converges.
    Property,
    /// An input that is not state of the machine.
    Parameter,
    /// Identifies the resource; defaults to its title.
    Namevar,
    /// Reported by the provider, never set by a manifest.
    ReadOnly,
    /// Settable only when the resource is created.
    InitOnly,
}

/// Whether an attribute's value is a path the provider must reach, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathAccess {
    /// Not a path the provider opens.
    None,
    /// Read: the host grants the nearest existing directory containing the path,
    /// read-only.
    Read,
    /// As `Read`, and every directory on the way is writable by root alone (or sticky):
    /// for what a program running as root reads by name, which no one may swap.
    ReadPrivate,
    /// Read and write: the host grants the directory containing the path.
    ReadWrite,
}

/// One attribute of a type, built with chained calls.
///
/// ```no_run
/// # use wconverge_sdk::{Attribute, DataType};
/// let mode = Attribute::new("mode", DataType::String, "Permission bits, like '0644'.");
/// let returns = Attribute::new("returns", DataType::Integer, "Expected exit codes.")
///     .many()
///     .default(vec![0i64])
///     .parameter();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub(crate) name: String,
    pub(crate) doc: String,
    pub(crate) data_type: DataType,
    pub(crate) min: u32,
    pub(crate) max: Option<u32>,
    pub(crate) default: Option<Value>,
    pub(crate) behaviour: Behaviour,
    pub(crate) sensitive: bool,
    pub(crate) unsettable: bool,
    pub(crate) path_access: PathAccess,
    pub(crate) checks: Vec<String>,
    pub(crate) refers_to: Option<String>,
    pub(crate) home_default: Option<(String, String)>,
}

impl Attribute {
    /// An optional, single-valued property.
    pub fn new(name: &str, data_type: DataType, doc: &str) -> Self {
        Attribute {
            name: name.to_owned(),
            doc: doc.to_owned(),
            data_type,
            min: 0,
            max: Some(1),
            default: None,
            behaviour: Behaviour::Property,
            sensitive: false,
            unsettable: false,
            path_access: PathAccess::None,
            checks: Vec::new(),
            refers_to: None,
            home_default: None,
        }
    }

    /// The attribute's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Must be set (minimum one value).
    pub fn required(mut self) -> Self {
        self.min = self.min.max(1);
        self
    }

    /// Takes any number of values: a single value or an array of them.
    pub fn many(mut self) -> Self {
        self.max = None;
        self
    }

    /// The value used when a resource does not set it.
    pub fn default(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// The namevar: identifies the resource and defaults to its title.
    pub fn namevar(mut self) -> Self {
        self.behaviour = Behaviour::Namevar;
        self
    }

    /// An input, not state of the machine.
    pub fn parameter(mut self) -> Self {
        self.behaviour = Behaviour::Parameter;
        self
    }

    /// Reported by the provider, never set by a manifest.
    pub fn read_only(mut self) -> Self {
        self.behaviour = Behaviour::ReadOnly;
        self
    }

    /// Settable only when the resource is created (Puppet's `init_only`): the host fails
    /// a resource whose plan would change it while it exists (the change's `current` is
    /// set).
    pub fn init_only(mut self) -> Self {
        self.behaviour = Behaviour::InitOnly;
        self
    }

    /// Values are redacted in every output.
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    /// Setting an empty value differs from not setting the attribute.
    pub fn unsettable(mut self) -> Self {
        self.unsettable = true;
        self
    }

    /// The value is a path the provider needs to reach (see [`PathAccess`]).
    pub fn path_access(mut self, access: PathAccess) -> Self {
        self.path_access = access;
        self
    }

    /// A check in wconverge's manifest language, which the host evaluates on each value
    /// before the run, whatever language the provider is written in: a block
    /// (`{ if $it =~ /\n/ { "one line only" } }`, with `$it` and the attribute's name
    /// bound to the value), a lambda (`|$line| { ... }`) or an expression
    /// (`$it != ""`). A string it returns is the error; `false` gives the standard
    /// message; anything else accepts the value.
    pub fn check(mut self, code: &str) -> Self {
        self.checks.push(code.to_owned());
        self
    }

    /// Puppet's `ensure` of things that exist or not: `present` (the default) or
    /// `absent`, with what `present` means for this type.
    pub fn ensure_present(doc: &str) -> Self {
        Attribute::new("ensure", DataType::enumeration(["present", "absent"]), doc)
            .default("present")
    }

    /// Its values name resources of `type_name` (a file's `owner` names a `user`): a
    /// resource requires each one it names that the catalog declares, as Puppet's
    /// autorequire does, so a manifest need not order them.
    pub fn refers_to(mut self, type_name: &str) -> Self {
        self.refers_to = Some(type_name.to_owned());
        self
    }

    /// When a resource does not set it: the home directory of the user the attribute
    /// `user_attribute` names, then `suffix` (`/.ssh/authorized_keys`), looked up by the
    /// host when the resource runs. A path attribute with such a default is granted as
    /// any other, from the value the host filled in.
    pub fn default_in_home(mut self, user_attribute: &str, suffix: &str) -> Self {
        self.home_default = Some((user_attribute.to_owned(), suffix.to_owned()));
        self
    }
}

/// A resource type, built with chained calls.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSchema {
    pub(crate) name: String,
    pub(crate) doc: String,
    pub(crate) attributes: Vec<Attribute>,
    pub(crate) invariants: Vec<(Option<String>, String)>,
    pub(crate) refreshable: bool,
    pub(crate) context: Vec<RunContext>,
    pub(crate) batch_state: bool,
    pub(crate) concurrency: Concurrency,
    pub(crate) watches: Vec<String>,
}

/// Which of a type's resources the host may apply while others run (`apply --jobs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Concurrency {
    /// One resource of the type and provider at a time: what a type gets unless it says
    /// otherwise (a package manager holds a lock).
    #[default]
    OneAtATime,
    /// Any number, but never two whose namevar paths are the same or one beneath the
    /// other (the namevar must be a path).
    PerPath,
    /// Any number at once: the resources share nothing. A resource whose `serial`
    /// attribute (if the type has one) is `true` runs alone.
    Any,
}

/// Data of the run a type's resources receive besides their attributes, read with
/// [`crate::Resource::context`]. Declared in the schema, so a reviewer sees which
/// plugins read what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunContext {
    /// The node's attributes, merged, as the context entry `node`.
    NodeAttributes,
    /// This machine's facts (each group to its list of records), as `facts`.
    Facts,
    /// The paths other resources of the catalog write beneath this resource's path (its
    /// namevar, which must be a read-write path), sorted, as `managed`: what a directory
    /// that purges the rest leaves alone.
    ManagedBeneath,
}

impl TypeSchema {
    /// A type named as manifests write it (`file`), with its documentation.
    pub fn new(name: &str, doc: &str) -> Self {
        TypeSchema {
            name: name.to_owned(),
            doc: doc.to_owned(),
            attributes: Vec::new(),
            invariants: Vec::new(),
            refreshable: false,
            context: Vec::new(),
            batch_state: false,
            concurrency: Concurrency::OneAtATime,
            watches: Vec::new(),
        }
    }

    /// A file whose changes may mean that resources of this type drifted, beyond their
    /// path attributes (always watched): a watching agent (`wconverge agent --watch`)
    /// checks the type's resources when it changes. An absolute path; `{name}` stands for
    /// each resource's value of its attribute `name`. Watching grants the plugin nothing.
    pub fn watches(mut self, path: &str) -> Self {
        self.watches.push(path.to_owned());
        self
    }

    /// Which of its resources the host may apply at the same time as others; one at a
    /// time unless it says so.
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// A rule over several attributes in wconverge's manifest language, which the host
    /// evaluates before the run with every attribute bound as a variable (`undef` when
    /// not set): `false` fails with `title` (or "Illegal invariant"), a string is the
    /// message, anything else holds.
    pub fn invariant(mut self, title: Option<&str>, code: &str) -> Self {
        self.invariants
            .push((title.map(str::to_owned), code.to_owned()));
        self
    }

    /// The host reads the state of this type's resources many at once, through
    /// [`crate::Provider::current_states`] (one read of a database for all of them; one
    /// call for the files of a directory), and plans each of them in the same call with
    /// [`crate::Provider::plan`], before the run reaches them; a resource found in sync
    /// then costs no call of its own. A batch holds only resources that need the same
    /// directories, and comes without run context: a type whose state or plan depends on
    /// its run context must not ask for this, and `plan` must depend on nothing but the
    /// resource and the state it is given.
    pub fn batch_state(mut self) -> Self {
        self.batch_state = true;
        self
    }

    /// Its resources receive this data of the run in their context.
    pub fn context(mut self, wanted: RunContext) -> Self {
        if !self.context.contains(&wanted) {
            self.context.push(wanted);
        }
        self
    }

    /// Adds an attribute.
    pub fn attribute(mut self, attribute: Attribute) -> Self {
        self.attributes.push(attribute);
        self
    }

    /// `refresh` does something for this type.
    pub fn refreshable(mut self) -> Self {
        self.refreshable = true;
        self
    }
}

/// What `describe` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInfo {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) types: Vec<TypeSchema>,
    pub(crate) requires: Option<String>,
}

impl ProviderInfo {
    /// A provider with its name and version and no types yet.
    pub fn new(name: &str, version: &str) -> Self {
        ProviderInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            types: Vec::new(),
            requires: None,
        }
    }

    /// Makes the provider suitable only where a resource program over the machine's
    /// facts holds, one expression per line, as in `requires`:
    ///
    /// ```
    /// # use wconverge_sdk::ProviderInfo;
    /// let info = ProviderInfo::new("apt", "1.0.0").requires("os.family == 'debian'");
    /// ```
    ///
    /// Where it does not hold, the host uses the next provider of the type that the
    /// policy lists, and refuses resources that name this one with `provider`. The host
    /// checks the program when it loads the plugin.
    pub fn requires(mut self, program: &str) -> Self {
        self.requires = Some(program.to_owned());
        self
    }

    /// Adds a type.
    pub fn with_type(mut self, schema: TypeSchema) -> Self {
        self.types.push(schema);
        self
    }
}
